"""Hugging Face `transformers` models train on the device as on the CPU.

Tiny random-init GPT-2, BERT (masked LM, with padded attention masks), T5,
Llama and ViT, built from config objects (never downloaded: the hub is
switched off), each train a few steps on the device and on the CPU from the
same initial weights, in Debug, Strict and Fused mode: the same losses, the
same gradients at every step and the same final weights and buffers (float32,
relative 1e-4), the same parameter sharing (GPT-2, BERT and T5 tie the output
projection to the input embedding), and no op on the CPU fallback. Attention
is the models' default for users, "sdpa".

The training and the checks are compare.assert_trains_as_on_cpu's, as in
test_zoo."""
import os
import sys

# Before transformers is imported: it reads these at import.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

# A pinned test dependency (requirements.txt): `make test` installs it.
transformers = pytest.importorskip("transformers", reason="the Hugging Face model tests need transformers")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import assert_trains_as_on_cpu, sharing  # noqa: E402

STEPS = 5
BATCH = 2
VOCAB = 128
SEQ = 16
ATTN = "sdpa"


def _tokens(g, length=SEQ, low=0):
    return torch.randint(low, VOCAB, (BATCH, length), generator=g)


def _causal_lm_batch(g):
    ids = _tokens(g)
    return {"input_ids": ids, "labels": ids}


def _gpt2():
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                     attn_implementation=ATTN)
    return transformers.GPT2LMHeadModel(config), _causal_lm_batch


def _bert():
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=SEQ,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                     attn_implementation=ATTN)

    def batch(g):
        ids = _tokens(g, low=1)
        mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        mask[1, SEQ - 5:] = 0  # the second sequence is padded
        ids[1, SEQ - 5:] = config.pad_token_id
        # Predict a third of the real tokens; -100 is ignored by the loss.
        chosen = (torch.rand(BATCH, SEQ, generator=g) < 0.35) & mask.bool()
        chosen[:, 0] = True
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}
    return transformers.BertForMaskedLM(config), batch


def _t5():
    config = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                   num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
                                   relative_attention_max_distance=16, dropout_rate=0.0,
                                   decoder_start_token_id=0, pad_token_id=0, attn_implementation=ATTN)

    def batch(g):
        ids = _tokens(g, low=1)
        mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        mask[0, SEQ - 4:] = 0
        ids[0, SEQ - 4:] = config.pad_token_id
        return {"input_ids": ids, "attention_mask": mask, "labels": _tokens(g, length=SEQ // 2, low=1)}
    return transformers.T5ForConditionalGeneration(config), batch


def _llama():
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
                                      attn_implementation=ATTN)
    return transformers.LlamaForCausalLM(config), _causal_lm_batch


def _vit():
    config = transformers.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, intermediate_size=64, num_labels=10,
                                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                    attn_implementation=ATTN)

    def batch(g):
        return {"pixel_values": torch.randn(BATCH, 3, 16, 16, generator=g),
                "labels": torch.randint(0, 10, (BATCH,), generator=g)}
    return transformers.ViTForImageClassification(config), batch


MODELS = {"gpt2": _gpt2, "bert": _bert, "t5": _t5, "llama": _llama, "vit": _vit}
TIED = {"gpt2", "bert", "t5"}


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_hf_model_trains_as_on_cpu(name, mode):
    torch.manual_seed(0)
    model, batch_of = MODELS[name]()
    assert model.config._attn_implementation == ATTN
    g = torch.Generator().manual_seed(1)
    batches = [batch_of(g) for _ in range(STEPS)]
    pattern = sharing(model)
    assert (pattern != list(range(len(pattern)))) == (name in TIED), pattern
    assert_trains_as_on_cpu(model, batches,
                            lambda m, inputs, device: m(**{k: v.to(device) for k, v in inputs.items()}).loss, mode)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_generate_with_a_static_cache(mode):
    # generate() compiles the decoding step itself (torch.compile's default
    # backend, which runs as backend="tpu" on the device): the CPU's tokens,
    # one program per cache shape, and a second generate of the same length
    # compiles nothing.
    import torchtpu
    from torchtpu import debug

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      attn_implementation=ATTN)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, VOCAB, (1, 6), generator=torch.Generator().manual_seed(2))
    kwargs = dict(max_new_tokens=12, do_sample=False, cache_implementation="static")
    want = model.generate(ids, **kwargs)
    model.to("tpu")
    with torchtpu.eager_mode(mode):
        torch._dynamo.reset()
        debug.reset_metrics()
        got = model.generate(ids.to("tpu"), **kwargs)
        assert got.cpu().tolist() == want.tolist()
        first = debug.metrics()
        assert first["compiled"]["programs"] >= 1 and first["compiled"]["abandoned"] == 0
        assert first["compiled"]["runs"] >= 10  # the decoding steps ran as the program
        again = model.generate(ids.to("tpu"), **kwargs)
        m = debug.metrics()
    assert again.cpu().tolist() == want.tolist()
    assert m["compilations"] == first["compilations"]
    assert m["compiled"]["programs"] == first["compiled"]["programs"]
    assert m["cpu_fallbacks"] == {}
    torch._dynamo.reset()
