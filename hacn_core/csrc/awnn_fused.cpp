// The adaptive MLP of AWNN (Errica et al., Eq. 14) as one autograd node, in C++.
//
// A line-by-line port of hacn_core.awnn._AdaptiveMLPFunction: the same ATen ops on
// the same operands in the same order, so forward values and gradients are equal
// bit for bit (tests/test_awnn_ext.py checks it). What it saves is the Python
// interpreter between the ~12 forward and ~20 backward ops of a two-layer MLP and
// the Python autograd.Function machinery, which dominate a training step at the
// tabular widths of the paper (benchmarks/bench_awnn.py measures both).
//
// Forward, per hidden layer l:  a = act([1 | h] rho_l^T),  q_j = e^{-nu j},
// h = a * q * c  (c = 1 - e^{-nu}, or renormalised, computed by the caller).
// Backward, with t = dL/dh * q * c:  dL/drho = g^T [1 | h_prev],  dL/dz = act'(z) t,
// dL/dnu = sum_j s_j (shift - j) with s_j = sum_b t_bj a_bj,  dL/draw = dL/dnu * (1 - e^{-nu}).
// The Python docstring of _AdaptiveMLPFunction derives each line.
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <vector>

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// same codes as hacn_core.awnn_ext.ACTIVATION_CODES
enum Activation : int64_t { kRelu = 0, kLeakyRelu = 1, kRelu6 = 2, kTanh = 3 };

Tensor activation_(Tensor z, int64_t activation, double slope) {
  switch (activation) {
    case kRelu: return at::relu_(z);
    case kLeakyRelu: return at::leaky_relu_(z, slope);
    case kRelu6: return at::hardtanh_(z, 0.0, 6.0);
    default: return at::tanh_(z);
  }
}

// dL/dz from dL/da and the saved output a (every activation here can be inverted on its output)
Tensor activation_backward(const Tensor& grad, const Tensor& a, int64_t activation, double slope) {
  switch (activation) {
    case kRelu: return at::threshold_backward(grad, a, 0);
    case kLeakyRelu: return at::leaky_relu_backward(grad, a, slope, true);
    case kRelu6: return at::hardtanh_backward(grad, a, 0.0, 6.0);
    default: return at::tanh_backward(grad, a);
  }
}

struct Intermediates {
  Tensor out;
  std::vector<Tensor> bufs, acts, qs;  // [1 | h] per layer input, activations, q^j
};

Intermediates run_forward(const Tensor& x, const std::vector<Tensor>& rhos, const std::vector<Tensor>& positions,
                          const std::vector<double>& nus, const std::vector<double>& scales, int64_t activation,
                          double slope, bool bias, const Tensor& ones, const Tensor& zero) {
  Intermediates r;
  Tensor buf = bias ? at::cat({ones, x}, 1) : x;  // [1 | x]: the dummy input of the bias (Sec. 3.1)
  r.bufs.push_back(buf);
  for (size_t l = 0; l < nus.size(); ++l) {
    Tensor a = activation_(at::mm(buf, rhos[l].t()), activation, slope);
    Tensor q = at::pow(at::Scalar(std::exp(-nus[l])), positions[l]);
    Tensor h = at::addcmul(zero, a, q, scales[l]);
    buf = bias ? at::cat({ones, h}, 1) : h;
    r.bufs.push_back(buf);
    r.acts.push_back(a);
    r.qs.push_back(q);
  }
  r.out = at::mm(buf, rhos.back().t());
  return r;
}

struct AdaptiveMLPFunction : public torch::autograd::Function<AdaptiveMLPFunction> {
  // Tensor and TensorList arguments are the node's inputs, in this order: x (0), raw (1),
  // rhos (2 .. L+2), ones, zero; the rest are constants of this step.
  static Tensor forward(AutogradContext* ctx, Tensor x, Tensor raw, at::TensorList rho_list,
                        std::vector<Tensor> positions, std::vector<double> nus, std::vector<double> scales,
                        std::vector<double> shifts, int64_t activation, double slope, bool bias, Tensor ones,
                        Tensor zero) {
    std::vector<Tensor> rhos = rho_list.vec();
    Intermediates r = run_forward(x, rhos, positions, nus, scales, activation, slope, bias, ones, zero);
    // x and the parameters go through save_for_backward (a second backward recomputes
    // from them); the intermediates are plain saved data, released by the first backward
    std::vector<Tensor> saved{x};
    saved.insert(saved.end(), rhos.begin(), rhos.end());
    ctx->save_for_backward(saved);
    auto& d = ctx->saved_data;
    d["bufs"] = r.bufs;
    d["acts"] = r.acts;
    d["qs"] = r.qs;
    d["released"] = false;
    d["positions"] = positions;
    d["nus"] = nus;
    d["scales"] = scales;
    d["shifts"] = shifts;
    d["activation"] = activation;
    d["slope"] = slope;
    d["bias"] = bias;
    d["ones"] = ones;
    d["zero"] = zero;
    return r.out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    variable_list saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    std::vector<Tensor> rhos(saved.begin() + 1, saved.end());
    auto& d = ctx->saved_data;
    const std::vector<Tensor> positions = d["positions"].toTensorVector();
    const std::vector<double> nus = d["nus"].toDoubleVector();
    const std::vector<double> scales = d["scales"].toDoubleVector();
    const std::vector<double> shifts = d["shifts"].toDoubleVector();
    const int64_t activation = d["activation"].toInt();
    const double slope = d["slope"].toDouble();
    const bool bias = d["bias"].toBool();
    const Tensor zero = d["zero"].toTensor();
    std::vector<Tensor> bufs, acts, qs;
    if (d["released"].toBool()) {  // a second backward through this graph: recompute
      at::NoGradGuard no_grad;
      Intermediates r = run_forward(x, rhos, positions, nus, scales, activation, slope, bias, d["ones"].toTensor(), zero);
      bufs = std::move(r.bufs);
      acts = std::move(r.acts);
      qs = std::move(r.qs);
    } else {
      // release the intermediates with this backward (autograd does the same with saved
      // tensors), so that the next step's allocations can reuse their memory
      bufs = d["bufs"].toTensorVector();
      acts = d["acts"].toTensorVector();
      qs = d["qs"].toTensorVector();
      d["bufs"] = std::vector<Tensor>{};
      d["acts"] = std::vector<Tensor>{};
      d["qs"] = std::vector<Tensor>{};
      d["released"] = true;
    }
    const size_t n = nus.size();
    const bool need_x = ctx->needs_input_grad(0), need_raw = ctx->needs_input_grad(1);
    Tensor g = grad_outputs[0];
    std::vector<Tensor> g_rho(n + 1);
    std::vector<Tensor> g_nu;
    Tensor g_x;
    for (size_t layer = n + 1; layer-- > 0;) {
      if (ctx->needs_input_grad(2 + layer)) g_rho[layer] = g.t().mm(bufs[layer]);
      if (layer == 0) {
        if (need_x) {
          g_x = g.mm(rhos[0]);
          if (bias) g_x = g_x.slice(1, 1);
        }
        break;
      }
      Tensor gh = g.mm(rhos[layer]);
      if (bias) gh = gh.slice(1, 1);
      const size_t k = layer - 1;
      const Tensor z = zero.scalar_type() == gh.scalar_type() ? zero : at::zeros({}, gh.options());
      Tensor t = at::addcmul(z, gh, qs[k], scales[k]);  // dL/dh * f
      if (need_raw) {
        // s_j = sum_b t_bj a_bj = sum_i W_ij dL/dW_ij: the second form costs out x D
        // instead of batch x D (the output layer is narrow)
        Tensor s_k;
        const Tensor& gr = g_rho[layer];
        if (gr.defined() && rhos[layer].size(0) < t.size(0)) {
          s_k = at::linalg_vecdot(bias ? rhos[layer].slice(1, 1) : rhos[layer], bias ? gr.slice(1, 1) : gr, 0);
        } else {
          s_k = at::linalg_vecdot(t, acts[k], 0);
        }
        g_nu.push_back(at::dot(s_k, positions[k] - shifts[k]));
      }
      g = activation_backward(t, acts[k], activation, slope);
    }
    Tensor g_raw;
    if (need_raw) {
      std::reverse(g_nu.begin(), g_nu.end());
      std::vector<double> dsig(n);
      for (size_t l = 0; l < n; ++l) dsig[l] = std::expm1(-nus[l]);
      // dL/draw = -dL/dnu * (1 - e^{-nu}), the sign folded into the shift - j above
      Tensor factor = at::tensor(dsig, g_nu[0].options().dtype(at::kDouble)).to(g_nu[0].scalar_type());
      g_raw = at::stack(g_nu).mul_(factor);
    }
    // one slot per forward argument (TensorList expanded); only x, raw and the rhos get a gradient
    variable_list out{g_x, g_raw};
    out.insert(out.end(), g_rho.begin(), g_rho.end());
    out.resize(out.size() + 9);  // positions, nus, scales, shifts, activation, slope, bias, ones, zero
    return out;
  }
};

Tensor adaptive_mlp(Tensor x, Tensor raw, std::vector<Tensor> rhos, std::vector<Tensor> positions,
                    std::vector<double> nus, std::vector<double> scales, std::vector<double> shifts,
                    int64_t activation, double slope, bool bias, Tensor ones, Tensor zero) {
  TORCH_CHECK(rhos.size() == nus.size() + 1 && positions.size() == nus.size() && scales.size() == nus.size() &&
                  shifts.size() == nus.size(),
              "adaptive_mlp: expected L + 1 rhos and L positions, rates, scales and shifts");
  return AdaptiveMLPFunction::apply(x, raw, at::TensorList(rhos), positions, nus, scales, shifts, activation, slope,
                                    bias, ones, zero);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("adaptive_mlp", &adaptive_mlp,
        "AWNN's adaptive MLP (Eq. 14): forward with a fused hand-written backward, one autograd node");
}
