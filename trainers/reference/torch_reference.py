#!/usr/bin/env python3
"""PyTorch reference for weft's GPT: the same model, the same weights, the same batches.

Reads a setup file written by the C++ side (tests/trainers/torch_reference_test.cc) in weft's
tensor-file format (trainers/README.md, "File format"):
  meta    gpt.vocab, gpt.context, gpt.layers, gpt.heads, gpt.channels, dtype (float32|float64),
          adamw.lr, adamw.beta1, adamw.beta2, adamw.eps, adamw.weight_decay, adamw.clip_norm,
          adamw.decay (comma-separated names of the tensors that take weight decay)
  tensors param/<name> (initial weights), input and target [steps, batch, seq] int32
and writes a result file in the same format:
  tensors logits [batch, seq, vocab] and loss [1] of step 0's batch, grad/<name> of step 0
          (before clipping), step_losses [steps] (each step's loss before its AdamW update),
          final/<name> (the weights after the last step)

Run with Debian's interpreter and torch: /usr/bin/python3 torch_reference.py SETUP RESULT
"""

import math
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MAGIC = b"WEFTTENS"
VERSION = 1
DTYPES = {1: np.float32, 2: np.float64, 3: np.int32, 4: np.int64}
CODES = {np.dtype(v): k for k, v in DTYPES.items()}


def read_tensor_file(path):
    data = open(path, "rb").read()
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(data):
            raise ValueError(f"{path}: truncated")
        chunk = data[pos:pos + n]
        pos += n
        return chunk

    def u32():
        return struct.unpack("<I", take(4))[0]

    def text():
        return take(u32()).decode()

    if take(8) != MAGIC:
        raise ValueError(f"{path}: not a weft tensor file")
    if u32() != VERSION:
        raise ValueError(f"{path}: unknown version")
    meta = {}
    for _ in range(u32()):
        key = text()
        meta[key] = text()
    tensors = {}
    for _ in range(u32()):
        name = text()
        dtype = np.dtype(DTYPES[u32()])
        shape = [struct.unpack("<q", take(8))[0] for _ in range(u32())]
        count = int(np.prod(shape)) if shape else 1
        tensors[name] = np.frombuffer(take(count * dtype.itemsize), dtype).reshape(shape).copy()
    return meta, tensors


def write_tensor_file(path, meta, tensors):
    out = [MAGIC, struct.pack("<II", VERSION, len(meta))]
    for key, value in meta.items():
        for s in (key.encode(), value.encode()):
            out += [struct.pack("<I", len(s)), s]
    out.append(struct.pack("<I", len(tensors)))
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        encoded = name.encode()
        out += [struct.pack("<I", len(encoded)), encoded,
                struct.pack("<II", CODES[array.dtype], array.ndim),
                struct.pack(f"<{array.ndim}q", *array.shape), array.astype("<" + array.dtype.str[1:]).tobytes()]
    with open(path, "wb") as f:
        f.write(b"".join(out))


class Attention(nn.Module):
    def __init__(self, channels, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(channels, 3 * channels)
        self.proj = nn.Linear(channels, channels)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        shape = (B, T, self.heads, C // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        scores = scores.masked_fill(~mask, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Mlp(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.fc = nn.Linear(channels, 4 * channels)
        self.proj = nn.Linear(4 * channels, channels)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, channels, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(channels)
        self.attn = Attention(channels, heads)
        self.ln2 = nn.LayerNorm(channels)
        self.mlp = Mlp(channels)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, context, layers, heads, channels):
        super().__init__()
        self.wte = nn.Embedding(vocab, channels)
        self.wpe = nn.Embedding(context, channels)
        self.blocks = nn.ModuleList(Block(channels, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(channels)
        self.lm_head = nn.Linear(channels, vocab, bias=False)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.lnf(x))
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def main(setup_path, result_path):
    torch.set_num_threads(1)
    meta, tensors = read_tensor_file(setup_path)
    dtype = {"float32": torch.float32, "float64": torch.float64}[meta["dtype"]]
    config = [int(meta["gpt." + k]) for k in ("vocab", "context", "layers", "heads", "channels")]
    model = Gpt(*config).to(dtype)
    state = {name[len("param/"):]: torch.from_numpy(array)
             for name, array in tensors.items() if name.startswith("param/")}
    missing = set(model.state_dict()) ^ set(state)
    if missing:
        raise ValueError(f"tensor names differ between the models: {sorted(missing)}")
    model.load_state_dict(state)

    decayed = set(filter(None, meta["adamw.decay"].split(",")))
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if n in decayed],
               "weight_decay": float(meta["adamw.weight_decay"])},
              {"params": [p for n, p in named if n not in decayed], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=float(meta["adamw.lr"]),
                                  betas=(float(meta["adamw.beta1"]), float(meta["adamw.beta2"])),
                                  eps=float(meta["adamw.eps"]), foreach=False)
    clip = float(meta["adamw.clip_norm"])

    inputs = torch.from_numpy(tensors["input"].astype(np.int64))
    targets = torch.from_numpy(tensors["target"].astype(np.int64))
    result = {}
    losses = []
    for step in range(inputs.shape[0]):
        optimizer.zero_grad(set_to_none=False)
        logits, loss = model(inputs[step], targets[step])
        loss.backward()
        if step == 0:
            result["logits"] = logits.detach().numpy()
            result["loss"] = loss.detach().reshape(1).numpy()
            for name, p in named:
                result["grad/" + name] = p.grad.detach().numpy().copy()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    result["step_losses"] = np.array(losses, dtype=np.float64)
    for name, p in named:
        result["final/" + name] = p.detach().numpy().copy()
    write_tensor_file(result_path, {"torch": torch.__version__}, result)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: torch_reference.py SETUP RESULT")
    main(sys.argv[1], sys.argv[2])
