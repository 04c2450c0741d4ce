// Connectionist temporal classification (PyTorch's LossCTC.cpp): the forward
// (alpha) and backward (beta) recursions over time as device loops, in the
// log domain with the CPU's max-shifted sums (a max of -inf counts as 0).
// States s of a sequence run over its extended labels l' (blank, l1, blank,
// l2, ..., blank); a state takes from s, s - 1 and, where `skip` says so
// (l'(s) is not blank and differs from l'(s - 2)), s - 2.
#include "ops/loss.h"

#include <limits>

namespace torchtpu::ops {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// log(exp(a) + exp(b) + exp(c)) as the CPU sums it.
Value log_sum3(Builder& b, Value x, Value y, Value z) {
  Value m = b.max(b.max(x, y), z);
  m = b.select(b.compare(m, b.full_like(m, kNegInf), Cmp::kEQ), b.zeros_like(m), m);
  Value s = b.add(b.add(b.exp(b.sub(x, m)), b.exp(b.sub(y, m))), b.exp(b.sub(z, m)));
  return b.add(b.log(s), m);
}

// v [B, S] moved `by` states up (by > 0: state s takes s - by) or down,
// -inf where it runs off.
Value shift(Builder& b, Value v, int64_t by) {
  const int64_t n = b.dims(v)[1];
  if (std::abs(by) >= n) return b.full_like(v, kNegInf);
  Value inf = b.constant(b.dtype(v), kNegInf);
  if (by > 0) return b.pad(b.slice_dim(v, 1, 0, n - by), inf, {0, by}, {0, 0});
  return b.pad(b.slice_dim(v, 1, -by, n), inf, {0, 0}, {0, -by});
}

Value s64(Builder& b, int64_t v) { return b.constant(DType::kS64, static_cast<double>(v)); }

// Row t of x [T, ...] (t an s64 scalar).
Value row(Builder& b, Value x, Value t) {
  const Dims full = b.dims(x);
  Dims sizes = full;
  sizes[0] = 1;
  std::vector<Value> starts(sizes.size(), s64(b, 0));
  starts[0] = t;
  const Dims rest(full.begin() + 1, full.end());
  return b.reshape(b.dynamic_slice(x, starts, sizes), rest);
}

// all [T, B, S] with row t replaced by v [B, S].
Value put_row(Builder& b, Value all, Value v, Value t) {
  Dims one = b.dims(v);
  one.insert(one.begin(), 1);
  return b.dynamic_update_slice_at(all, b.reshape(v, one), {t, s64(b, 0), s64(b, 0)});
}

// Rows t of every b: x [T, B, S] at t = idx[b] (clamped to [0, T)) -> [B, S].
Value rows_at(Builder& b, Value x, Value idx) {
  const Dims d = b.dims(x);
  Value t = b.max(b.min(idx, b.full_like(idx, static_cast<double>(d[0] - 1))), b.zeros_like(idx));
  Value bi = b.iota(DType::kS64, {d[1]}, 0);
  Value pairs = b.concatenate({b.reshape(t, {d[1], 1}), b.reshape(bi, {d[1], 1})}, 1);  // [B, 2]
  return b.gather(x, pairs, {0, 1}, {1}, {d[1], d[2]});
}

}  // namespace

CtcForward ctc_forward(Builder& b, Value lpl, Value skip, Value valid, Value in_len, Value tgt_len) {
  const Dims d = b.dims(lpl);  // [T, B, S]
  const int64_t T = d[0], B = d[1], S = d[2];
  const DType t = b.dtype(lpl);
  Value inf = b.constant(t, kNegInf, {B, S});
  Value state = b.iota(DType::kS64, {B, S}, 1);
  Value has_target = b.compare(b.reshape(tgt_len, {B, 1}), b.constant(DType::kS64, 0, {B, 1}), Cmp::kGT);
  Value first = b.logical_or(b.compare(state, b.zeros_like(state), Cmp::kEQ),
                             b.logical_and(b.compare(state, b.full_like(state, 1), Cmp::kEQ), has_target));
  Value alpha0 = b.select(first, row(b, lpl, s64(b, 0)), inf);
  Value all = put_row(b, b.constant(t, kNegInf, {T, B, S}), alpha0, s64(b, 0));
  std::vector<Value> out = b.while_loop(
      {s64(b, 1), alpha0, all, lpl, skip, valid, in_len},
      [&](Builder& lb, const std::vector<Value>& v) {
        return lb.compare(v[0], lb.constant(DType::kS64, static_cast<double>(T)), Cmp::kLT);
      },
      [&](Builder& lb, const std::vector<Value>& v) {
        Value prev = v[1];
        Value ninf = lb.full_like(prev, kNegInf);
        Value a3 = lb.select(v[4], shift(lb, prev, 2), ninf);
        Value next = lb.add(log_sum3(lb, prev, shift(lb, prev, 1), a3), row(lb, v[3], v[0]));
        Value live = lb.compare(lb.broadcast_to(v[0], {B, 1}), lb.reshape(v[6], {B, 1}), Cmp::kLT);  // t < T_b
        next = lb.select(lb.logical_and(v[5], live), next, ninf);
        return std::vector<Value>{lb.add(v[0], s64(lb, 1)), next, put_row(lb, v[2], next, v[0]), v[3], v[4], v[5],
                                  v[6]};
      });
  all = out[2];
  // nll = -log(alpha[T_b - 1, 2 L] + alpha[T_b - 1, 2 L - 1]) (one state when L = 0).
  Value last = rows_at(b, all, b.sub(in_len, b.full_like(in_len, 1)));  // [B, S]
  Value end = b.mul(tgt_len, b.full_like(tgt_len, 2));
  Value pick = [&] {
    Value ends = b.concatenate({b.reshape(b.iota(DType::kS64, {B}, 0), {B, 1}), b.reshape(end, {B, 1})}, 1);
    return b.gather(last, ends, {0, 1}, {}, {B});
  }();
  Value before = [&] {
    Value e1 = b.max(b.sub(end, b.full_like(end, 1)), b.zeros_like(end));
    Value ends = b.concatenate({b.reshape(b.iota(DType::kS64, {B}, 0), {B, 1}), b.reshape(e1, {B, 1})}, 1);
    return b.gather(last, ends, {0, 1}, {}, {B});
  }();
  Value no_target = b.compare(tgt_len, b.zeros_like(tgt_len), Cmp::kEQ);
  Value ninf_b = b.constant(t, kNegInf, {B});
  Value ll = log_sum3(b, pick, b.select(no_target, ninf_b, before), ninf_b);
  // No input frames: likelihood 1 for an empty target, else 0.
  Value no_input = b.compare(in_len, b.zeros_like(in_len), Cmp::kEQ);
  ll = b.select(no_input, b.select(no_target, b.zeros_like(ll), ninf_b), ll);
  return {b.neg(ll), b.transpose(all, {1, 0, 2})};
}

Value ctc_backward(Builder& b, Value grad_out, Value lp, Value lpl, Value onehot, Value skip, Value valid,
                   Value in_len, Value tgt_len, Value nll, Value log_alpha, bool zero_infinity) {
  const Dims d = b.dims(lpl);  // [T, B, S]
  const int64_t T = d[0], B = d[1], S = d[2];
  const DType t = b.dtype(lpl);
  Value inf = b.constant(t, kNegInf, {B, S});
  Value state = b.iota(DType::kS64, {B, S}, 1);
  Value end = b.reshape(b.mul(tgt_len, b.full_like(tgt_len, 2)), {B, 1});
  // beta at t = T_b - 1: the last two states (one when L = 0).
  Value final_states = b.logical_or(
      b.compare(state, b.broadcast_to(end, {B, S}), Cmp::kEQ),
      b.logical_and(b.compare(state, b.broadcast_to(b.sub(end, b.full_like(end, 1)), {B, S}), Cmp::kEQ),
                    b.compare(b.broadcast_to(end, {B, S}), b.zeros_like(state), Cmp::kGT)));
  Value skip_up = shift(b, b.convert(skip, t), -2);  // from s to s + 2
  skip_up = b.compare(skip_up, b.full_like(skip_up, 1), Cmp::kEQ);
  std::vector<Value> out = b.while_loop(
      {s64(b, T - 1), inf, b.constant(t, kNegInf, {T, B, S}), lpl, skip_up, valid, in_len, final_states},
      [&](Builder& lb, const std::vector<Value>& v) {
        return lb.compare(v[0], lb.constant(DType::kS64, 0), Cmp::kGE);
      },
      [&](Builder& lb, const std::vector<Value>& v) {
        Value next = v[1];
        Value ninf = lb.full_like(next, kNegInf);
        Value here = row(lb, v[3], v[0]);
        Value b3 = lb.select(v[4], shift(lb, next, -2), ninf);
        Value step = lb.add(log_sum3(lb, next, shift(lb, next, -1), b3), here);
        Value tb = lb.reshape(v[6], {B, 1});
        Value tt = lb.broadcast_to(v[0], {B, 1});
        Value is_last = lb.compare(lb.add(tt, lb.constant(DType::kS64, 1, {B, 1})), tb, Cmp::kEQ);
        Value inside = lb.compare(lb.add(tt, lb.constant(DType::kS64, 1, {B, 1})), tb, Cmp::kLT);
        Value beta = lb.select(lb.broadcast_to(is_last, {B, S}), lb.select(v[7], here, ninf),
                               lb.select(lb.broadcast_to(inside, {B, S}), step, ninf));
        beta = lb.select(v[5], beta, ninf);
        return std::vector<Value>{lb.sub(v[0], s64(lb, 1)), beta, put_row(lb, v[2], beta, v[0]), v[3], v[4], v[5],
                                  v[6], v[7]};
      });
  // lcab[t, b, c] = log sum over the states of label c of alpha * beta.
  Value ab = b.add(b.transpose(log_alpha, {1, 0, 2}), out[2]);  // [T, B, S]
  ab = b.select(b.broadcast_to(valid, {T, B, S}), ab, b.constant(t, kNegInf, {T, B, S}));
  Value m = b.reduce_max(ab, {2});  // [T, B]
  m = b.select(b.is_finite(m), m, b.zeros_like(m));
  Value e = b.exp(b.sub(ab, b.broadcast_in_dim(m, {T, B, S}, {0, 1})));
  // [B, T, S] x [B, S, C] -> [B, T, C]
  Value sums = b.dot_general(b.transpose(e, {1, 0, 2}), onehot, {0}, {0}, {2}, {1}, t);
  Value lcab = b.add(b.log(b.transpose(sums, {1, 0, 2})), b.broadcast_in_dim(m, b.dims(lp), {0, 1}));
  Value nll_b = b.broadcast_in_dim(nll, b.dims(lp), {1});
  Value g = b.sub(b.exp(lp), b.exp(b.sub(b.add(lcab, nll_b), lp)));
  g = b.mul(g, b.broadcast_in_dim(grad_out, b.dims(lp), {1}));
  // Frames past each input's length, and (zero_infinity) infinite losses, get 0.
  Value frame = b.iota(DType::kS64, b.dims(lp), 0);
  Value live = b.compare(frame, b.broadcast_in_dim(in_len, b.dims(lp), {1}), Cmp::kLT);
  if (zero_infinity)
    live = b.logical_and(live, b.compare(nll_b, b.full_like(nll_b, std::numeric_limits<double>::infinity()),
                                         Cmp::kNE));
  return b.select(live, g, b.zeros_like(g));
}

}  // namespace torchtpu::ops
