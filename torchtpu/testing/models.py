"""Small reference models: an MLP, a GPT-style decoder (pre-norm blocks,
causal self-attention written with plain tensor ops, GELU MLP) and a CNN with
batch norm and pooling."""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

_TEXT = os.path.join(os.path.dirname(__file__), "tiny_corpus.txt")


class MLP(nn.Module):
    def __init__(self, d_in=32, d_hidden=64, d_out=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_hidden), nn.Tanh(),
                                 nn.Linear(d_hidden, d_out))

    def forward(self, x):
        return self.net(x)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, max_len, dropout):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1),
                             persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(self.mask[:t, :t], float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, width, heads, max_len, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, max_len, dropout)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width),
                                 nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, width=64, layers=4, heads=4, max_len=64, dropout=0.0):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(max_len, width)
        self.blocks = nn.ModuleList(Block(width, heads, max_len, dropout) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx, targets=None):
        b, t = idx.shape
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(b * t, -1), targets.view(b * t))


class CharData:
    """Character-level batches from the corpus shipped with the package."""

    def __init__(self, path=_TEXT):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.chars = sorted(set(text))
        self.vocab = len(self.chars)
        index = {c: i for i, c in enumerate(self.chars)}
        self.data = torch.tensor([index[c] for c in text], dtype=torch.long)

    def batch(self, batch, seq, generator):
        starts = torch.randint(0, len(self.data) - seq - 1, (batch,), generator=generator)
        x = torch.stack([self.data[s:s + seq] for s in starts])
        y = torch.stack([self.data[s + 1:s + seq + 1] for s in starts])
        return x, y


class SmallCNN(nn.Module):
    """Two conv + batch-norm + ReLU stages (the first max-pooled), global
    average pooling and a linear classifier; input [N, 3, 32, 32]."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def cnn_batch(batch, generator, classes=10):
    """Random images [batch, 3, 32, 32] and labels [batch] for SmallCNN."""
    x = torch.randn(batch, 3, 32, 32, generator=generator)
    y = torch.randint(0, classes, (batch,), generator=generator)
    return x, y
