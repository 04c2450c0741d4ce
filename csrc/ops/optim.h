// The fused optimizer updates (_fused_adam_, _fused_adamw_, _fused_sgd_) of
// one parameter, as PyTorch's fused CPU kernels compute them: elementwise in
// the parameter's opmath type (float32 for 16-bit parameters), the bias
// corrections from the step count in float64.
#pragma once

#include "ops/builder.h"

namespace torchtpu::ops {

struct AdamConfig {
  double beta1 = 0.9, beta2 = 0.999, weight_decay = 0, eps = 1e-8;
  bool amsgrad = false, maximize = false;
  bool decoupled = false;  // AdamW: the parameter decays by lr * weight_decay
};

// The values of one parameter's update; max_exp_avg_sq only with amsgrad.
struct AdamValues {
  Value param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq;
};

// One step. Values arrive in the opmath type; `step` (0-d, any numeric type)
// is the step count after its increment, `lr` a 0-d float64, `inv_scale` the
// gradient's unscaling factor (0-d, invalid for none). The result's grad is
// the unscaled gradient (the fused kernels write it back).
AdamValues adam_step(Builder& b, const AdamValues& v, Value step, Value lr, Value grad_scale, const AdamConfig& c);

struct SgdConfig {
  double weight_decay = 0, momentum = 0, dampening = 0;
  bool nesterov = false, maximize = false, first_step = false;
};

// One SGD step: param, grad and (with momentum) the momentum buffer.
struct SgdValues {
  Value param, grad, momentum_buffer;
};
SgdValues sgd_step(Builder& b, const SgdValues& v, Value lr, Value grad_scale, const SgdConfig& c);

}  // namespace torchtpu::ops
