"""The trainer's data: records from local files (through Hugging Face
`datasets`) or a generated set, tokenized, and batches chosen by position.

A batch is a pure function of (seed, position): the order is a concatenation
of seeded permutations of the records, one per epoch, and optimizer step s,
micro-batch m, rank r takes its slice of it. So a resumed run reads exactly
the batches the uninterrupted run would have read, without replaying the
loader, and ranks never overlap."""
import os

import torch

_TINY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testing", "tiny_corpus.txt")


class ByteTokenizer:
    """Bytes of UTF-8 text as token ids 0-255 (no vocabulary file, nothing to
    download). Id 0 pads."""
    vocab_size = 256
    pad_token_id = 0

    def encode(self, text):
        return list(text.encode("utf-8"))


class HFTokenizer:
    """A Hugging Face tokenizer from a local directory."""

    def __init__(self, path):
        from transformers import AutoTokenizer
        self.tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.vocab_size = len(self.tok)
        pad = self.tok.pad_token_id
        self.pad_token_id = pad if pad is not None else (self.tok.eos_token_id or 0)

    def encode(self, text):
        return self.tok(text, add_special_tokens=False)["input_ids"]


def tokenizer(cfg):
    return ByteTokenizer() if cfg.tokenizer in (None, "bytes") else HFTokenizer(cfg.tokenizer)


def _files(cfg):
    files = cfg.files
    if files is None:
        if cfg.format != "text":
            raise ValueError(f"torchtpu.train: data.files is required for data.format={cfg.format}")
        return [_TINY]
    files = [files] if isinstance(files, str) else list(files)
    for f in files:
        if not os.path.exists(f):
            raise FileNotFoundError(f"torchtpu.train: data file {f!r} does not exist")
    return files


def load_texts(cfg, cache_dir):
    """The records' texts, read through `datasets` from local files only."""
    import datasets
    datasets.logging.set_verbosity_warning()
    datasets.disable_progress_bars()
    builder = {"text": "text", "json": "json", "jsonl": "json", "parquet": "parquet"}.get(cfg.format)
    if builder is None:
        raise ValueError(f"torchtpu.train: unknown data.format {cfg.format!r} "
                         "(text, json, parquet or generated)")
    # Text: the whole file is one record to pack, or each line one record.
    kwargs = {"sample_by": "document" if cfg.packing else "line"} if builder == "text" else {}
    ds = datasets.load_dataset(builder, data_files=_files(cfg), split="train", cache_dir=cache_dir, **kwargs)
    field = "text" if builder == "text" else cfg.text_field
    if field not in ds.column_names:
        raise KeyError(f"torchtpu.train: the data has no field {field!r} (it has {ds.column_names}); "
                       "set data.text_field")
    return [t for t in ds[field] if t]


class TokenData:
    """Token sequences and their batches by position (see the module docstring).
    Each record is a list of ids at most seq_len long; with packing, every
    record is exactly seq_len long."""

    def __init__(self, cfg, seed, cache_dir=None):
        self.cfg = cfg
        self.seed = seed
        self.tok = tokenizer(cfg)
        self.pad_id = self.tok.pad_token_id
        n = cfg.seq_len
        if cfg.format == "generated":
            g = torch.Generator().manual_seed(seed + 12345)
            count = int(cfg.get("records", 512))
            starts = torch.randint(0, self.tok.vocab_size, (count, 1), generator=g)
            lengths = (torch.full((count,), n) if cfg.packing
                       else torch.randint(max(1, n // 4), n + 1, (count,), generator=g))
            ramp = (starts + torch.arange(n)) % self.tok.vocab_size
            self.records = [ramp[i, :int(lengths[i])].tolist() for i in range(count)]
        else:
            ids = [self.tok.encode(t) for t in load_texts(cfg, cache_dir)]
            if cfg.packing:
                flat = [i for r in ids for i in r]
                self.records = [flat[i:i + n] for i in range(0, len(flat) - n + 1, n)]
            else:
                self.records = [r[:n] for r in ids if r]
        if not self.records:
            raise ValueError(f"torchtpu.train: the data gives no sequence of {n} tokens; "
                             "lower data.seq_len or add data")
        self._perms = {}

    @property
    def vocab_size(self):
        return self.tok.vocab_size

    def __len__(self):
        return len(self.records)

    def _index(self, i):
        epoch, at = divmod(i, len(self.records))
        perm = self._perms.get(epoch)
        if perm is None:
            perm = torch.randperm(len(self.records), generator=torch.Generator().manual_seed(self.seed + epoch))
            self._perms = {epoch: perm}  # only the current epoch is kept
        return int(perm[at])

    def micro_batch(self, step, micro, grad_accum, batch_size, rank, world):
        """The records of rank `rank` for micro-batch `micro` of optimizer step `step`."""
        per_micro = batch_size // grad_accum
        per_rank = per_micro // world
        first = step * batch_size + micro * per_micro + rank * per_rank
        return [self.records[self._index(first + j)] for j in range(per_rank)]

    def collate(self, records):
        """input_ids, attention_mask and labels (-100 on padding), padded to
        the longest record rounded up to pad_to_multiple_of."""
        longest = max(len(r) for r in records)
        multiple = self.cfg.pad_to_multiple_of or 1
        width = -(-longest // multiple) * multiple if not self.cfg.packing else longest
        ids = torch.full((len(records), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(records), width), dtype=torch.long)
        for i, r in enumerate(records):
            ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, :len(r)] = 1
        labels = ids.masked_fill(mask == 0, -100)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}
