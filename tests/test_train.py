"""torchtpu.train, the trainer: the command line trains and writes its
metrics, TensorBoard events, plot, checkpoints and a Hugging Face export;
every switch gives the CPU's losses; a killed run resumes as if never
stopped; the export loads on the CPU without torchtpu with the same logits;
DDP, FSDP2 and tensor parallel on two processes, and two "nodes" through
torchrun's rendezvous, give the single-process CPU losses."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import torchtpu
from torchtpu.train import compose
from torchtpu.train.data import TokenData
from torchtpu.train.monitor import read_metrics
from torchtpu.train.trainer import Trainer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
QUIET = ["trainer.tensorboard=false", "trainer.plot=false", "trainer.export_hf=false", "trainer.log_every=1",
         "trainer.progress=lines"]


def env(**extra):
    e = dict(os.environ)
    e.pop("TORCHTPU_CPU_DEVICES", None)
    e.pop("WANDB_MODE", None)
    e.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **{k: str(v) for k, v in extra.items()})
    return e


def run(overrides, run_dir, cls=Trainer):
    return cls(compose([f"trainer.run_dir={run_dir}", *QUIET, *overrides])).fit()


def assert_close(got, want, rtol):
    got, want = torch.tensor(got), torch.tensor(want)
    assert got.shape == want.shape, (got, want)
    torch.testing.assert_close(got, want, rtol=rtol, atol=0)


def test_command_line_trains_and_writes_what_a_person_watches(tmp_path):
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "torchtpu.train", "model=gpt2-tiny", "data=text-tiny",
                        "trainer.steps=30", "trainer.log_every=5", "trainer.checkpoint_every=10",
                        f"hydra.run.dir={out}"], env=env(WANDB_MODE="offline"), capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "step    30/30" in p.stdout and "tok/s" in p.stdout and "eta" in p.stdout
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [5, 10, 15, 20, 25, 30]
    assert rows[-1]["loss"] < rows[0]["loss"] - 1.0, rows
    assert all(r["tokens_per_s"] > 0 and r["lr"] > 0 for r in rows)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ea = EventAccumulator(str(out / "tensorboard"))
    ea.Reload()
    assert [round(e.value, 5) for e in ea.Scalars("train/loss")] == [round(r["loss"], 5) for r in rows]
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(os.listdir(out / "checkpoints")) == ["step_00000010", "step_00000020", "step_00000030"]
    assert (out / "hf" / "config.json").exists() and (out / "hf" / "model.safetensors").exists()
    runs = [d for d in os.listdir(out / "wandb") if d.startswith("offline-run-")]
    assert len(runs) == 1


SWITCHES = {
    "defaults": [],
    "strict": ["trainer.mode=strict"],
    "debug": ["trainer.mode=debug"],
    "compile": ["trainer.compile=true"],
    "bf16": ["trainer.precision=bf16"],
    "checkpointing": ["trainer.activation_checkpointing=true"],
    "grad_accum": ["trainer.grad_accum=2"],
    "llama": ["model=llama-tiny"],
    "padded": ["data=generated", "data.packing=false"],
    "sgd": ["optim=sgd", "trainer.max_grad_norm=null"],
}


@pytest.mark.parametrize("switch", list(SWITCHES))
def test_each_switch_gives_the_cpu_losses(switch, tmp_path):
    over = ["trainer.steps=4", "trainer.batch_size=4", *SWITCHES[switch]]
    cpu = run([*over, "trainer.device=cpu"], tmp_path / "cpu")
    tpu = run([*over, "trainer.device=tpu"], tmp_path / "tpu")
    assert len(tpu) == 4 and tpu[-1] < tpu[0]
    assert_close(tpu, cpu, rtol=5e-3 if switch == "bf16" else 2e-5)


def test_activation_checkpointing_is_on_when_asked(tmp_path):
    for on in (False, True):
        t = Trainer(compose([f"trainer.run_dir={tmp_path}", f"trainer.activation_checkpointing={on}"]))
        t.setup()
        assert t.model.is_activation_checkpointing is on


def test_a_run_started_over_in_its_directory_replaces_its_checkpoints(tmp_path):
    first = run(["trainer.steps=2"], tmp_path)
    again = run(["trainer.steps=2"], tmp_path)  # not resumed: from step 0, over the old checkpoint
    assert_close(again, first, rtol=1e-6)
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["step_00000002"]


def test_the_loop_restores_the_eager_mode(tmp_path):
    before = torchtpu.get_eager_mode()
    other = "strict" if before != "strict" else "fused"
    run(["trainer.steps=1", f"trainer.mode={other}"], tmp_path)
    assert torchtpu.get_eager_mode() == before


DROPOUT = ["trainer.steps=8", "trainer.checkpoint_every=4", "trainer.batch_size=4", "model.config.resid_pdrop=0.1",
           "model.config.attn_pdrop=0.1"]


def test_a_killed_run_resumes_with_the_uninterrupted_losses(tmp_path):
    """Killed (SIGKILL) after its step-4 checkpoint, resumed from it: steps 5-8
    give the losses of a run never stopped; dropout makes the device's RNG
    state part of what must be restored."""
    whole = run(DROPOUT, tmp_path / "whole")
    out = tmp_path / "killed"
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "train", "killable.py"), *DROPOUT, *QUIET,
                          f"hydra.run.dir={out}"], env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, cwd=tmp_path)
    deadline = time.time() + 240
    while not (out / "checkpoints" / "step_00000004").exists():
        assert p.poll() is None, p.stdout.read()
        assert time.time() < deadline, "no checkpoint within 240 s"
        time.sleep(0.1)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    assert not (out / "checkpoints" / "step_00000008").exists()
    resumed = run([*DROPOUT, "trainer.resume=true"], out)
    assert len(resumed) == 4
    assert_close(resumed, whole[4:], rtol=1e-6)
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(1, 9))
    assert_close([r["loss"] for r in rows], whole, rtol=1e-6)


def test_the_export_loads_on_the_cpu_without_torchtpu_with_the_same_logits(tmp_path):
    trainer = Trainer(compose([f"trainer.run_dir={tmp_path}", *QUIET, "trainer.export_hf=true", "trainer.steps=5",
                               "model=llama-tiny"]))
    trainer.fit()
    ids = torch.arange(40).reshape(2, 20) * 7 % 256
    with torch.no_grad():
        want = trainer.model(ids.to(trainer.device)).logits.cpu()
    torch.save(ids, tmp_path / "ids.pt")
    script = textwrap.dedent(f"""
        import sys, torch
        from transformers import AutoModelForCausalLM
        assert "torchtpu" not in sys.modules
        m = AutoModelForCausalLM.from_pretrained({str(tmp_path / 'hf')!r})
        with torch.no_grad():
            torch.save(m(torch.load({str(tmp_path / 'ids.pt')!r})).logits, {str(tmp_path / 'cpu.pt')!r})
        assert "torchtpu" not in sys.modules
    """)
    p = subprocess.run([sys.executable, "-c", script], env=env(TORCH_DEVICE_BACKEND_AUTOLOAD="0"),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    torch.testing.assert_close(torch.load(tmp_path / "cpu.pt"), want, rtol=1e-4, atol=1e-4)

    # model=pretrained starts from the export, and trains as the CPU does.
    over = ["model=pretrained", f"model.pretrained={tmp_path / 'hf'}", "trainer.steps=2"]
    again = Trainer(compose([f"trainer.run_dir={tmp_path / 'again'}", *QUIET, *over]))
    again.setup()
    trained = {k: v.cpu() for k, v in trainer.model.state_dict().items()}
    for k, v in again.model.state_dict().items():
        torch.testing.assert_close(v.cpu(), trained[k], rtol=0, atol=0, msg=k)
    assert_close(again.fit(), run([*over, "trainer.device=cpu"], tmp_path / "again-cpu"), rtol=2e-5)


@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "tp"])
def test_two_processes_give_the_single_process_cpu_losses(strategy, tmp_path):
    over = ["trainer.steps=4", "trainer.checkpoint_every=2", "trainer.batch_size=8"]
    if strategy == "tp":
        over.append("model=llama-tiny")  # GPT-2 has no tensor-parallel plan
    want = run([*over, "trainer.device=cpu"], tmp_path / "cpu")
    out = tmp_path / strategy
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--standalone",
           "-m", "torchtpu.train", f"parallel={strategy}", *over, *QUIET, "trainer.export_hf=true",
           f"hydra.run.dir={out}"]
    p = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    rows = read_metrics(out / "metrics.jsonl")
    assert_close([r["loss"] for r in rows], want, rtol=2e-5)
    ckpt = out / "checkpoints" / "step_00000004"
    assert sorted(f for f in os.listdir(ckpt) if f.startswith("rng_")) == ["rng_rank0.pt", "rng_rank1.pt"]
    from transformers import AutoModelForCausalLM
    cpu_model = AutoModelForCausalLM.from_pretrained(out / "hf")
    ref = Trainer(compose([f"trainer.run_dir={tmp_path / 'cpu2'}", *QUIET, *over, "trainer.device=cpu"]))
    ref.fit()
    for (name, a), (_, b) in zip(sorted(cpu_model.state_dict().items()), sorted(ref.model.state_dict().items())):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)

    # Resumed from the step-2 checkpoint (DCP shards under FSDP2 and TP),
    # steps 3 and 4 give the same losses again.
    import shutil
    shutil.rmtree(ckpt)
    p = subprocess.run([*cmd, "trainer.resume=true"], env=env(), capture_output=True, text=True, timeout=400,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert "step     3/4" in p.stdout and "step     1/4" not in p.stdout
    assert_close([r["loss"] for r in read_metrics(out / "metrics.jsonl")], want, rtol=2e-5)


def test_two_nodes_on_loopback_train_through_the_rendezvous(tmp_path):
    """Two torchrun agents, one process each ("nodes"), meet through the c10d
    rendezvous on loopback and train FSDP2 with the single-process CPU losses."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    over = ["trainer.steps=3", "trainer.batch_size=4"]
    want = run([*over, "trainer.device=cpu"], tmp_path / "cpu")
    out = tmp_path / "nodes"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=train-test",
           "-m", "torchtpu.train", "parallel=fsdp", *over, *QUIET, f"hydra.run.dir={out}"]
    procs = [subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              cwd=tmp_path) for _ in range(2)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=400)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("the two nodes did not finish within 400 s")
    assert all(p.returncode == 0 for p in procs), "\n".join(o[-3000:] for o in outs)
    rows = read_metrics(out / "metrics.jsonl")
    assert_close([r["loss"] for r in rows], want, rtol=2e-5)


def test_the_example_subclass_matches_the_cpu(tmp_path):
    spec = importlib.util.spec_from_file_location("train_custom", os.path.join(ROOT, "examples", "train_custom.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    over = ["trainer.steps=3", "+smoothing=0.2"]
    cpu = run([*over, "trainer.device=cpu"], tmp_path / "cpu", cls=mod.SmoothedTrainer)
    tpu = run(over, tmp_path / "tpu", cls=mod.SmoothedTrainer)
    assert_close(tpu, cpu, rtol=2e-5)
    rows = read_metrics(tmp_path / "tpu" / "metrics.jsonl")
    assert all(r["embedding_lr"] == pytest.approx(r["lr"]) for r in rows)


def test_batches_by_position_split_ranks_and_cover_each_epoch():
    cfg = compose(["data=generated", "data.records=24"]).data
    data = TokenData(cfg, seed=3)
    seen = []
    for step in range(3):  # 3 steps of 8 = one epoch of 24 records
        for micro in range(2):
            for rank in range(2):
                seen += [tuple(r) for r in data.micro_batch(step, micro, 2, 8, rank, 2)]
    assert sorted(seen) == sorted(tuple(r) for r in data.records)
    again = TokenData(cfg, seed=3)
    assert again.micro_batch(5, 1, 2, 8, 1, 2) == data.micro_batch(5, 1, 2, 8, 1, 2)


def test_bad_configs_raise_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="batch_size 6 must split into grad_accum 4"):
        run(["trainer.batch_size=6", "trainer.grad_accum=4"], tmp_path / "a")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run(["data=jsonl", f"data.files={tmp_path / 'missing.jsonl'}"], tmp_path / "b")
    with pytest.raises(ValueError, match="trainer.log_every must be an integer of at least 1, got 0"):
        run(["trainer.log_every=0"], tmp_path / "e")
    with pytest.raises(ValueError, match="optim.schedule must be cosine, linear or constant, got 'cosin'"):
        run(["optim.schedule=cosin"], tmp_path / "f")
    with pytest.raises(ValueError, match="unknown parallel.strategy"):
        run(["parallel.strategy=pipeline"], tmp_path / "c")
    from transformers import AutoConfig, AutoModelForCausalLM
    from torchtpu.train.parallel import tensor_parallel
    gpt2 = AutoModelForCausalLM.from_config(AutoConfig.for_model("gpt2", n_layer=1, n_embd=8, n_head=2))
    with pytest.raises(ValueError, match="parallel=tp needs a model with a tensor-parallel plan"):
        tensor_parallel(gpt2, "tpu", 2)
    with pytest.raises(ValueError, match="trainer.precision must be fp32 or bf16"):
        run(["trainer.precision=fp8", "trainer.steps=1"], tmp_path / "d")


def test_parquet_records_and_a_local_tokenizer(tmp_path):
    """data.format=parquet with a Hugging Face tokenizer from a directory:
    the CPU's losses, and the export carries the tokenizer."""
    import pandas
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
    words = "the cat sat on a mat dog ran far".split()
    vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]").save_pretrained(tmp_path / "tok")
    g = torch.Generator().manual_seed(0)
    texts = [" ".join(words[int(i)] for i in torch.randint(0, len(words), (int(n),), generator=g))
             for n in torch.randint(3, 14, (24,), generator=g)]
    pandas.DataFrame({"text": texts}).to_parquet(tmp_path / "d.parquet")
    over = ["data=jsonl", "data.format=parquet", f"data.files={tmp_path / 'd.parquet'}",
            f"data.tokenizer={tmp_path / 'tok'}", "data.seq_len=16", "trainer.steps=3", "trainer.batch_size=4"]
    cpu = run([*over, "trainer.device=cpu"], tmp_path / "cpu")
    tpu = run([*over, "trainer.export_hf=true"], tmp_path / "tpu")
    assert_close(tpu, cpu, rtol=2e-5)
    exported = AutoTokenizer.from_pretrained(tmp_path / "tpu" / "hf")
    assert exported("the cat ran")["input_ids"] == [2, 3, 9]


def test_json_lines_records_pad_to_a_multiple(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"body": "x" * n}) + "\n" for n in (3, 9, 17, 30)))
    cfg = compose(["data=jsonl", f"data.files={path}", "data.text_field=body", "data.seq_len=20"]).data
    data = TokenData(cfg, seed=0, cache_dir=str(tmp_path / "c"))
    batch = data.collate(data.records)
    assert batch["input_ids"].shape == (4, 24)  # longest 20 (30 cut to seq_len), padded to 8
    assert batch["attention_mask"].sum(1).sort().values.tolist() == [3, 9, 17, 20]
    assert (batch["labels"] == -100).sum().item() == 4 * 24 - 49
    losses = run(["data=jsonl", f"data.files={path}", "data.text_field=body", "data.seq_len=20",
                  "trainer.steps=2", "trainer.batch_size=2"], tmp_path / "run")
    assert len(losses) == 2 and all(torch.isfinite(torch.tensor(losses)))
