"""The real-model test zoo: small versions of the architectures users train.

Each entry builds a model from a seed and gives `batches(n)`: a list of
(inputs, target) pairs on the CPU, and `loss(model, inputs, target)`. Models
are built from code, never downloaded."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ResNetSmall(nn.Module):
    """Two residual stages (conv, batch norm, ReLU, a strided projection
    shortcut), global average pooling and a linear head; input [N, 3, 16, 16]."""

    def __init__(self, classes=10, width=8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                                   nn.ReLU(), nn.Conv2d(width, width, 3, padding=1, bias=False),
                                   nn.BatchNorm2d(width))
        self.down = nn.Sequential(nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(2 * width), nn.ReLU())
        self.shortcut = nn.Conv2d(width, 2 * width, 1, stride=2, bias=False)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = self.stem(x)
        x = F.relu(x + self.block(x))
        x = self.down(x) + self.shortcut(x)
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ViT(nn.Module):
    """Patch embedding by a strided conv, a class token, learned positions,
    pre-norm nn.TransformerEncoder layers and a classifier on the class token."""

    def __init__(self, classes=10, image=16, patch=4, width=32, heads=4, layers=2):
        super().__init__()
        self.patch = nn.Conv2d(3, width, patch, stride=patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, width) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.encoder(x))[:, 0])


class GPTDecoder(nn.Module):
    """GPT-2 style: token and position embeddings, causal
    scaled_dot_product_attention blocks, and the output projection tied to
    the token embedding."""

    def __init__(self, vocab=37, width=32, heads=4, layers=2, max_len=16):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(max_len, width)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(dict(ln1=nn.LayerNorm(width), qkv=nn.Linear(width, 3 * width),
                               proj=nn.Linear(width, width), ln2=nn.LayerNorm(width),
                               fc=nn.Linear(width, 4 * width), out=nn.Linear(4 * width, width)))
            for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.tok.weight

    def forward(self, idx):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(x.shape[-1], dim=2)
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + blk["proj"](y.transpose(1, 2).reshape(b, t, -1))
            x = x + blk["out"](F.gelu(blk["fc"](blk["ln2"](x)), approximate="tanh"))
        return self.lm_head(self.ln(x))


class LSTMLanguageModel(nn.Module):
    """Embedding, a two-layer nn.LSTM and a linear decoder."""

    def __init__(self, vocab=37, width=24, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.lstm = nn.LSTM(width, width, layers, batch_first=True)
        self.dec = nn.Linear(width, vocab)

    def forward(self, idx):
        y, _ = self.lstm(self.emb(idx))
        return self.dec(y)


class BertEncoder(nn.Module):
    """BERT style: word, position and token-type embeddings with layer norm,
    post-norm encoder layers that ignore padded positions
    (src_key_padding_mask), and an MLM head tied to the word embedding."""

    def __init__(self, vocab=37, width=32, heads=4, layers=2, max_len=16):
        super().__init__()
        self.word = nn.Embedding(vocab, width, padding_idx=0)
        self.position = nn.Embedding(max_len, width)
        self.token_type = nn.Embedding(2, width)
        self.ln = nn.LayerNorm(width)
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.transform = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width))
        self.decoder = nn.Linear(width, vocab)
        self.decoder.weight = self.word.weight

    def forward(self, idx, padding):
        t = idx.shape[1]
        x = self.word(idx) + self.position(torch.arange(t, device=idx.device)) + self.token_type(
            torch.zeros_like(idx))
        x = self.encoder(self.ln(x), src_key_padding_mask=padding)
        return self.decoder(self.transform(x))


class UNetBlock(nn.Module):
    """A diffusion-UNet style block: conv, group norm, SiLU, a residual conv
    pair, self-attention over the pixels, a strided down conv and a
    nearest-upsampled skip back up."""

    def __init__(self, channels=16, groups=4, heads=2):
        super().__init__()
        self.inp = nn.Conv2d(3, channels, 3, padding=1)
        self.norm1 = nn.GroupNorm(groups, channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.attn_norm = nn.GroupNorm(groups, channels)
        self.attn = nn.MultiheadAttention(channels, heads, batch_first=True)
        self.down = nn.Conv2d(channels, channels, 3, stride=2, padding=1)
        self.up = nn.Conv2d(channels, channels, 3, padding=1)
        self.out = nn.Conv2d(channels, 3, 3, padding=1)

    def forward(self, x):
        h = self.inp(x)
        h = h + self.conv2(F.silu(self.norm2(self.conv1(F.silu(self.norm1(h))))))
        b, c, hh, ww = h.shape
        a = self.attn_norm(h).flatten(2).transpose(1, 2)
        a, _ = self.attn(a, a, a, need_weights=False)
        h = h + a.transpose(1, 2).reshape(b, c, hh, ww)
        d = self.down(F.silu(h))
        h = h + self.up(F.interpolate(d, scale_factor=2.0, mode="nearest"))
        return self.out(F.silu(h))


def _images(n, seed, classes=10):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(4, 3, 16, 16, generator=g), torch.randint(0, classes, (4,), generator=g))
            for _ in range(n)]


def _tokens(n, seed, vocab=37, t=12):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randint(1, vocab, (3, t + 1), generator=g)
        out.append((x[:, :-1], x[:, 1:]))
    return out


def _masked(n, seed, vocab=37, t=12):
    """Token batches with right padding (id 0) of random lengths and a
    padding mask; the MLM target is the token itself, -100 on padding."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randint(1, vocab, (3, t), generator=g)
        lengths = torch.randint(t // 2, t + 1, (3,), generator=g)
        padding = torch.arange(t)[None, :] >= lengths[:, None]
        x = x.masked_fill(padding, 0)
        out.append(((x, padding), x.masked_fill(padding, -100)))
    return out


def _classify(model, x, y):
    return F.cross_entropy(model(x), y)


def _lm(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


def _mlm(model, inputs, y):
    logits = model(*inputs)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100)


def _denoise(model, x, _):
    return F.mse_loss(model(x), x * 0.5)


# name -> (constructor, batches(n), loss)
ZOO = {
    "resnet": (ResNetSmall, lambda n: _images(n, 1), _classify),
    "vit": (ViT, lambda n: _images(n, 2), _classify),
    "gpt": (GPTDecoder, lambda n: _tokens(n, 3), _lm),
    "lstm": (LSTMLanguageModel, lambda n: _tokens(n, 4), _lm),
    "bert": (BertEncoder, lambda n: _masked(n, 5), _mlm),
    "unet": (UNetBlock, lambda n: _images(n, 6), _denoise),
}
