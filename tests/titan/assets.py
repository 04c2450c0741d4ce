"""The TorchTitan test's local assets, generated at run time (nothing is
downloaded): a text dataset and a byte-level BPE tokenizer.

- Dataset: TorchTitan's "c4_test" dataset entry loads
  `datasets.load_dataset(path, split="train")` and reads each sample's "text";
  `--dataloader.dataset-path DIR` points it at a directory holding one JSON
  lines file of {"text": ...} records (the `datasets` "json" builder names the
  only split "train").
- Tokenizer: TorchTitan's HuggingFaceTokenizer reads `tokenizer.json` (a
  `tokenizers` Tokenizer) and `tokenizer_config.json` (bos_token / eos_token)
  from `--hf-assets-path DIR`. The llama3 debug model's vocabulary is 2048,
  so the BPE is trained to at most 2048 tokens, specials included.
"""
import json
import os
import random

VOCAB_SIZE = 2048  # llama3 "debugmodel": vocab_size=2048
BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"

_WORDS = (
    "the a one every some many few model device graph tensor layer weight token step loss batch "
    "program compiler kernel shard rank gradient optimizer memory cache buffer value shape stream "
    "train runs builds reads writes sends keeps moves holds splits joins learns computes returns "
    "fast slow small large quiet bright early late local remote simple careful exact stable "
    "river mountain forest city garden window letter story music morning evening winter summer "
    "and or but while because after before when then so"
).split()


def _lines(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        sentences = []
        for _ in range(rng.randint(1, 4)):
            words = [rng.choice(_WORDS) for _ in range(rng.randint(5, 18))]
            sentences.append(" ".join(words).capitalize() + rng.choice(".!?"))
        out.append(" ".join(sentences))
    return out


def make_dataset(directory, lines=400, seed=0):
    """A directory with data.jsonl: `lines` records {"text": ...}."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "data.jsonl")
    if not os.path.exists(path):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            for line in _lines(lines, seed):
                f.write(json.dumps({"text": line}) + "\n")
        os.replace(tmp, path)
    return directory


def make_tokenizer(directory, seed=1):
    """A directory with tokenizer.json (byte-level BPE, <= VOCAB_SIZE tokens)
    and tokenizer_config.json naming BOS and EOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    os.makedirs(directory, exist_ok=True)
    tok_path = os.path.join(directory, "tokenizer.json")
    if not os.path.exists(tok_path):
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=[BOS, EOS],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        tok.train_from_iterator(_lines(2000, seed), trainer=trainer)
        assert tok.get_vocab_size() <= VOCAB_SIZE, tok.get_vocab_size()
        tok.save(tok_path + ".tmp")
        os.replace(tok_path + ".tmp", tok_path)
    cfg_path = os.path.join(directory, "tokenizer_config.json")
    if not os.path.exists(cfg_path):
        with open(cfg_path + ".tmp", "w") as f:
            json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": True, "add_eos_token": True}, f)
        os.replace(cfg_path + ".tmp", cfg_path)
    return directory


if __name__ == "__main__":
    import sys

    root = sys.argv[1]
    print(make_dataset(os.path.join(root, "data")), make_tokenizer(os.path.join(root, "tokenizer")))
