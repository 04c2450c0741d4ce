#include "ops/rnn.h"

#include "ops/elementwise.h"

namespace torchtpu::ops {
namespace {

// Chunk `i` of `n` equal parts of dim 1.
Value chunk(Builder& b, Value v, int64_t n, int64_t i) {
  const int64_t h = b.dims(v)[1] / n;
  return b.slice_dim(v, 1, i * h, (i + 1) * h);
}

Value one_minus(Builder& b, Value v) { return b.sub(b.full_like(v, 1), v); }

// Chunk `i` of `n` of a [n*H] bias, broadcast to `like`.
Value bias_part(Builder& b, Value bias, int64_t n, int64_t i, Value like) {
  const int64_t h = b.dims(bias)[0] / n;
  return b.broadcast_to(b.slice_dim(bias, 0, i * h, (i + 1) * h), b.dims(like));
}

// Chunk `i` of `v` plus that chunk of `bias` when there is one.
Value part(Builder& b, Value v, Value bias, int64_t n, int64_t i) {
  Value c = chunk(b, v, n, i);
  return bias.valid() ? b.add(c, bias_part(b, bias, n, i, c)) : c;
}

// Gate pre-activation `i` of `n`: input + hidden + input bias + hidden bias,
// summed left to right as the CUDA kernel does.
Value gate(Builder& b, Value ig, Value hg, Value ib, Value hb, int64_t n, int64_t i) {
  Value g = b.add(chunk(b, ig, n, i), chunk(b, hg, n, i));
  if (ib.valid()) g = b.add(g, bias_part(b, ib, n, i, g));
  if (hb.valid()) g = b.add(g, bias_part(b, hb, n, i, g));
  return g;
}

}  // namespace

LstmCell lstm_cell(Builder& b, Value ig, Value hg, Value cx, Value ib, Value hb) {
  Value i = sigmoid(b, gate(b, ig, hg, ib, hb, 4, 0));
  Value f = sigmoid(b, gate(b, ig, hg, ib, hb, 4, 1));
  Value g = b.tanh(gate(b, ig, hg, ib, hb, 4, 2));
  Value o = sigmoid(b, gate(b, ig, hg, ib, hb, 4, 3));
  Value cy = b.add(b.mul(f, cx), b.mul(i, g));
  Value hy = b.mul(o, b.tanh(cy));
  return {hy, cy, b.concatenate({i, f, g, o}, 1)};
}

LstmCellGrad lstm_cell_backward(Builder& b, Value ghy, Value gcy, Value cx, Value cy, Value ws) {
  Value i = chunk(b, ws, 4, 0), f = chunk(b, ws, 4, 1), g = chunk(b, ws, 4, 2), o = chunk(b, ws, 4, 3);
  Value tcy = b.tanh(cy);
  if (!ghy.valid()) ghy = b.zeros_like(cy);
  Value gc = b.mul(b.mul(ghy, o), one_minus(b, b.mul(tcy, tcy)));
  if (gcy.valid()) gc = b.add(gc, gcy);
  Value gi = b.mul(b.mul(b.mul(gc, g), one_minus(b, i)), i);
  Value gf = b.mul(b.mul(b.mul(gc, cx), one_minus(b, f)), f);
  Value gg = b.mul(b.mul(gc, i), one_minus(b, b.mul(g, g)));
  Value go = b.mul(b.mul(b.mul(ghy, tcy), one_minus(b, o)), o);
  return {b.concatenate({gi, gf, gg, go}, 1), b.mul(gc, f)};
}

GruCell gru_cell(Builder& b, Value ig, Value hg, Value hx, Value ib, Value hb) {
  Value r = sigmoid(b, gate(b, ig, hg, ib, hb, 3, 0));
  Value z = sigmoid(b, gate(b, ig, hg, ib, hb, 3, 1));
  Value in = part(b, ig, ib, 3, 2), hn = part(b, hg, hb, 3, 2);
  Value n = b.tanh(b.add(in, b.mul(r, hn)));
  Value hy = b.add(n, b.mul(z, b.sub(hx, n)));
  return {hy, b.concatenate({r, z, n, hx, hn}, 1)};
}

GruCellGrad gru_cell_backward(Builder& b, Value ghy, Value ws) {
  Value r = chunk(b, ws, 5, 0), z = chunk(b, ws, 5, 1), n = chunk(b, ws, 5, 2), hx = chunk(b, ws, 5, 3),
        hn = chunk(b, ws, 5, 4);
  Value gz = b.mul(b.mul(b.mul(ghy, b.sub(hx, n)), one_minus(b, z)), z);
  Value gn = b.mul(b.mul(ghy, one_minus(b, z)), one_minus(b, b.mul(n, n)));
  Value ghn = b.mul(gn, r);
  Value gr = b.mul(b.mul(b.mul(gn, hn), one_minus(b, r)), r);
  return {b.concatenate({gr, gz, gn}, 1), b.concatenate({gr, gz, ghn}, 1), b.mul(ghy, z)};
}

}  // namespace torchtpu::ops
