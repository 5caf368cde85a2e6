// The adaptive MLP of AWNN (Errica et al., Eq. 14) as one autograd node, in C++.
//
// A line-by-line port of hacn_core.awnn.fast_node.AdaptiveMLPFunction: the same ATen ops on
// the same operands in the same order, so forward values and gradients are equal
// bit for bit (tests/test_awnn_ext.py checks it). What it saves is the Python
// interpreter between the ~12 forward and ~20 backward ops of a two-layer MLP and
// the Python autograd.Function machinery, which dominate a training step at the
// tabular widths of the paper (benchmarks/bench_awnn.py measures both). The node also
// computes the rates and the constants of Eq. 14 from the raw parameter (the Python
// formulas, in double), and resize_layer does the tensor work of a width change
// (AdaptiveLinear.resize_unchecked_), so a training step runs little Python besides the optimizer.
//
// Forward, per hidden layer l:  a = act([1 | h] rho_l^T),  q_j = e^{-nu j},
// h = a * q * c  (c = 1 - e^{-nu}, or renormalised over M neurons).
// Backward, with t = dL/dh * q * c:  dL/drho = g^T [1 | h_prev],  dL/dz = act'(z) t,
// dL/dnu = sum_j s_j (shift - j) with s_j = sum_b t_bj a_bj,  dL/draw = dL/dnu * (1 - e^{-nu}).
// The Python docstring of AdaptiveMLPFunction (hacn_core/awnn/fast_node.py) derives each line.
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <vector>

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// same codes as hacn_core.awnn.fast_cpp.ACTIVATION_CODES
enum Activation : int64_t { kRelu = 0, kLeakyRelu = 1, kRelu6 = 2, kTanh = 3 };

Tensor activation_(Tensor z, int64_t activation, double slope) {
  switch (activation) {
    case kRelu: return at::relu_(z);
    case kLeakyRelu: return at::leaky_relu_(z, slope);
    case kRelu6: return at::hardtanh_(z, 0.0, 6.0);
    default: return at::tanh_(z);
  }
}

// dL/dz from dL/da and the saved output a (every activation here can be inverted on its output),
// written over grad (a temporary of the backward: one allocation fewer, the same values)
Tensor activation_backward_(Tensor grad, const Tensor& a, int64_t activation, double slope) {
  switch (activation) {
    case kRelu: return at::threshold_backward_out(grad, grad, a, 0);
    case kLeakyRelu: return at::leaky_relu_backward_out(grad, grad, a, slope, true);
    case kRelu6: return at::hardtanh_backward_out(grad, grad, a, 0.0, 6.0);
    default: return at::tanh_backward_out(grad, grad, a);
  }
}

// The rates nu_l = softplus(raw_l) and the constants c_l (importance_scale) and s_l
// (importance_log_shift) of hacn_core.awnn.importance, in double, by the same formulas in the same
// order: Python's math module calls the same C library functions, so both nodes see the
// same numbers. norms[l] is the width M of a renormalised layer, or 0 for Eq. 12 as written.
struct Rates {
  std::vector<double> nus, scales, shifts;
};

double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

Rates rates_from_raw(const Tensor& raw, const std::vector<int64_t>& norms) {
  const int64_t n = raw.numel();
  TORCH_CHECK(static_cast<size_t>(n) == norms.size(), "adaptive_mlp: raw has ", n, " rates for ", norms.size(),
              " hidden layers");
  std::vector<double> values(n);
  Tensor r = raw.detach();
  if (r.device().is_cpu() && r.dim() == 1 && (r.scalar_type() == at::kFloat || r.scalar_type() == at::kDouble)) {
    const int64_t stride = r.stride(0);  // read in place: no tensor op for two numbers
    if (r.scalar_type() == at::kFloat) {
      const float* p = r.const_data_ptr<float>();
      for (int64_t l = 0; l < n; ++l) values[l] = static_cast<double>(p[l * stride]);
    } else {
      const double* p = r.const_data_ptr<double>();
      for (int64_t l = 0; l < n; ++l) values[l] = p[l * stride];
    }
  } else {  // another device or dtype: every value converts to double exactly, as with tolist()
    Tensor d = r.reshape({-1}).to(at::kCPU, at::kDouble).contiguous();
    const double* p = d.const_data_ptr<double>();
    for (int64_t l = 0; l < n; ++l) values[l] = p[l];
  }
  Rates out;
  for (int64_t l = 0; l < n; ++l) {
    const double nu = softplus(values[l]);
    const int64_t m = norms[l];
    out.nus.push_back(nu);
    out.scales.push_back(m == 0 ? -std::expm1(-nu) : std::expm1(-nu) / std::expm1(-nu * static_cast<double>(m)));
    double shift = 1.0 / std::expm1(nu);
    if (m != 0) shift -= static_cast<double>(m) / std::expm1(nu * static_cast<double>(m));
    out.shifts.push_back(shift);
  }
  return out;
}

// The (batch, 1) column of ones (the dummy input of the bias, Sec. 3.1) and the 0-d zero
// (the input of addcmul, which scales a product in one op). On the CPU they are kept from
// one step to the next; elsewhere made afresh (a kept device tensor could outlive its
// device's runtime at exit).
Tensor ones_column(const Tensor& x) {
  if (!x.device().is_cpu()) return at::ones({x.size(0), 1}, x.options());
  thread_local Tensor ones;
  if (!ones.defined() || ones.size(0) != x.size(0) || ones.scalar_type() != x.scalar_type()) {
    ones = at::ones({x.size(0), 1}, x.options());
  }
  return ones;
}

Tensor zero_like(const Tensor& x) {
  if (!x.device().is_cpu()) return at::zeros({}, x.options());
  thread_local Tensor zero;
  if (!zero.defined() || zero.scalar_type() != x.scalar_type()) zero = at::zeros({}, x.options());
  return zero;
}

// q^j and j - s for a double q or s. at::pow(Scalar, T) and T - Scalar wrap the double in a
// tensor and convert it to T's dtype with one more op; on the CPU, for float and double, the
// double is converted here (static_cast rounds as that copy does, so the values are the same)
// into a 0-d tensor written in place. Elsewhere the Scalar forms, as in the Python node.
Tensor cpu_scalar_like(double v, const Tensor& like) {
  Tensor t = at::empty({}, like.options());
  if (like.scalar_type() == at::kFloat) {
    *t.mutable_data_ptr<float>() = static_cast<float>(v);
  } else {
    *t.mutable_data_ptr<double>() = v;
  }
  return t;
}

bool scalar_fast_path(const Tensor& like) {
  return like.device().is_cpu() && (like.scalar_type() == at::kFloat || like.scalar_type() == at::kDouble);
}

Tensor pow_of(double base, const Tensor& exponent) {
  if (scalar_fast_path(exponent)) return at::pow(cpu_scalar_like(base, exponent), exponent);
  return at::pow(at::Scalar(base), exponent);
}

Tensor minus(const Tensor& t, double v) {
  if (scalar_fast_path(t)) return at::sub(t, cpu_scalar_like(v, t));
  return t - v;
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
    Tensor q = pow_of(std::exp(-nus[l]), positions[l]);
    if (bias) {
      // [1 | h] with h = a * q * c written straight into its columns: the values of
      // cat({ones, addcmul(zero, a, q, c)}), one pass over the batch x D block fewer
      buf = at::empty({a.size(0), a.size(1) + 1}, a.options());
      buf.select(1, 0).fill_(1);
      Tensor h = buf.narrow(1, 1, a.size(1));
      at::addcmul_out(h, zero, a, q, scales[l]);
    } else {
      buf = at::addcmul(zero, a, q, scales[l]);
    }
    r.bufs.push_back(buf);
    r.acts.push_back(a);
    r.qs.push_back(q);
  }
  r.out = at::mm(buf, rhos.back().t());
  return r;
}

struct AdaptiveMLPFunction : public torch::autograd::Function<AdaptiveMLPFunction> {
  // Tensor and TensorList arguments are the node's inputs, in this order: x (0), raw (1),
  // rhos (2 .. L+2); the rest are constants of this step.
  static Tensor forward(AutogradContext* ctx, Tensor x, Tensor raw, at::TensorList rho_list,
                        std::vector<Tensor> positions, std::vector<int64_t> norms, int64_t activation, double slope,
                        bool bias, double w_coef, double r_mu, double r_coef) {
    std::vector<Tensor> rhos = rho_list.vec();
    Rates rates = rates_from_raw(raw, norms);
    const std::vector<double>& nus = rates.nus;
    const std::vector<double>& scales = rates.scales;
    const std::vector<double>& shifts = rates.shifts;
    const Tensor zero = zero_like(x);
    const Tensor ones = bias ? ones_column(x) : zero;
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
    d["prior"] = std::vector<double>{w_coef, r_mu, r_coef};
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
    const std::vector<double> prior = d["prior"].toDoubleVector();
    const double w_coef = prior[0], r_mu = prior[1], r_coef = prior[2];
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
      if (ctx->needs_input_grad(2 + layer)) {
        if (layer == 0 && w_coef > 0) {  // fused weight prior: dL/drho + w_coef * rho in one op
          g_rho[0] = at::addmm(rhos[0], g.t(), bufs[0], w_coef, 1.0);
        } else {
          g_rho[layer] = g.t().mm(bufs[layer]);
        }
      }
      if (layer == 0) {
        if (need_x) {
          g_x = g.mm(rhos[0]);
          // without the bias column, copied to a contiguous tensor: a strided gradient slows the
          // ops it flows into (a gather, as in a GNN's scatter-sum backward, by 8x)
          if (bias) g_x = g_x.slice(1, 1).contiguous();
        }
        break;
      }
      const size_t k = layer - 1;
      const Tensor& gr = g_rho[layer];
      // s_j = sum_b t_bj a_bj = sum_i W_ij dL/dW_ij: the second form costs out x D instead
      // of batch x D (the output layer is narrow)
      const bool by_weights = need_raw && gr.defined() && rhos[layer].size(0) < g.size(0);
      Tensor gh = g.mm(rhos[layer]);
      if (bias) gh = gh.slice(1, 1);
      const Tensor z = zero.scalar_type() == gh.scalar_type() ? zero : at::zeros({}, gh.options());
      Tensor t = at::addcmul(z, gh, qs[k], scales[k]);  // dL/dh * f
      if (need_raw) {
        Tensor s_k;
        if (by_weights) {
          s_k = at::linalg_vecdot(bias ? rhos[layer].slice(1, 1) : rhos[layer], bias ? gr.slice(1, 1) : gr, 0);
        } else {
          s_k = at::linalg_vecdot(t, acts[k], 0);
        }
        g_nu.push_back(at::dot(s_k, minus(positions[k], shifts[k])));
      }
      // fused weight prior, after s_k (which reads the likelihood's gradient alone)
      if (w_coef > 0 && g_rho[layer].defined()) g_rho[layer].add_(rhos[layer], w_coef);
      g = activation_backward_(t, acts[k], activation, slope);  // over t, read no more
    }
    Tensor g_raw;
    if (need_raw) {
      std::reverse(g_nu.begin(), g_nu.end());
      std::vector<double> dsig(n);
      for (size_t l = 0; l < n; ++l) dsig[l] = std::expm1(-nus[l]);
      // dL/draw = -dL/dnu * (1 - e^{-nu}), the sign folded into the shift - j above
      Tensor factor;  // rounded to the gradient's dtype, as torch.tensor(dsig, dtype=...) does
      if (g_nu[0].scalar_type() == at::kFloat) {
        factor = at::tensor(std::vector<float>(dsig.begin(), dsig.end()), g_nu[0].options());
      } else {
        factor = at::tensor(dsig, g_nu[0].options().dtype(at::kDouble)).to(g_nu[0].scalar_type());
      }
      if (r_coef > 0) {
        // fused rate prior: d/draw_l of r_coef (nu_l - mu)^2 / 2 is r_coef (nu_l - mu) (1 - e^{-nu_l}),
        // in double, rounded once to the gradient's dtype; g_raw = prior + g_nu * factor
        std::vector<double> extra(n);
        for (size_t l = 0; l < n; ++l) extra[l] = r_coef * (nus[l] - r_mu) * -std::expm1(-nus[l]);
        Tensor prior_t = at::tensor(extra, g_nu[0].options().dtype(at::kDouble)).to(g_nu[0].scalar_type());
        g_raw = at::addcmul(prior_t, at::stack(g_nu), factor);
      } else {
        g_raw = at::stack(g_nu).mul_(factor);
      }
    }
    // one slot per forward argument (TensorList expanded); only x, raw and the rhos get a gradient
    variable_list out{g_x, g_raw};
    out.insert(out.end(), g_rho.begin(), g_rho.end());
    out.resize(out.size() + 8);  // positions, norms, activation, slope, bias, w_coef, r_mu, r_coef
    return out;
  }
};

// The priors of Eq. 13 in closed form, as one node: hacn_core.awnn.elbo.PriorTermsFunction in C++
// (the same ATen ops in the same order, so both give the values and gradients of the autograd
// composition that negative_elbo(closed_form_priors=False) builds, bit for bit).
//   weight prior  w = [sum_p sum(p^2)] / (2 sigma_theta^2) [+ n log sigma_theta] [/ N]
//   width prior   r = sum_l (softplus(raw_l) - mu)^2 / (2 sigma^2) [+ L log sigma] [/ N]
// Their gradients are closed forms: dw/dp = p / sigma_theta^2 (a weight decay on the active
// block) and dr/draw_l = (nu_l - mu) / sigma^2 * sigmoid(raw_l), computed here as autograd's
// backward of that composition computes them (pow_backward, div by the scalar, softplus_backward).
// A prior with denominator 0 is absent (its output is an unused zero). per_sample: N > 0.
struct PriorTermsFunction : public torch::autograd::Function<PriorTermsFunction> {
  static variable_list forward(AutogradContext* ctx, at::TensorList rho_list, at::TensorList raw_list,
                               double w_denom, double w_const, double r_mu, double r_denom, double r_const,
                               double per_sample_n, bool constants) {
    std::vector<Tensor> rhos = rho_list.vec(), raws = raw_list.vec();
    Tensor w, r, d;
    const Tensor& like = rhos.empty() ? raws.at(0) : rhos[0];
    if (w_denom > 0 && !rhos.empty()) {
      std::vector<Tensor> sq;
      sq.reserve(rhos.size());
      for (const Tensor& p : rhos) sq.push_back(at::pow(p, 2).sum());
      w = at::div(at::stack(sq).sum(), w_denom);
      if (constants) w = at::add(w, w_const);
      if (per_sample_n > 0) w = at::div(w, per_sample_n);
    } else {
      w = at::zeros({}, like.options());
    }
    if (r_denom > 0 && !raws.empty()) {
      std::vector<Tensor> nus;
      for (const Tensor& raw : raws) nus.push_back(at::softplus(raw, 1, 20));
      d = at::sub(nus.size() == 1 ? nus[0] : at::cat(nus), r_mu);  // cat of one tensor is a copy
      r = at::div(at::pow(d, 2).sum(), r_denom);
      if (constants) r = at::add(r, r_const);
      if (per_sample_n > 0) r = at::div(r, per_sample_n);
    } else {
      r = at::zeros({}, like.options());
      d = at::zeros({0}, like.options());
    }
    std::vector<Tensor> saved(rhos);
    saved.insert(saved.end(), raws.begin(), raws.end());
    saved.push_back(d);
    ctx->save_for_backward(saved);
    auto& data = ctx->saved_data;
    data["n_rho"] = static_cast<int64_t>(rhos.size());
    data["w_denom"] = w_denom;
    data["r_denom"] = r_denom;
    data["per_sample_n"] = per_sample_n;
    return {w, r};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    variable_list saved = ctx->get_saved_variables();
    auto& data = ctx->saved_data;
    const int64_t n_rho = data["n_rho"].toInt();
    const double w_denom = data["w_denom"].toDouble(), r_denom = data["r_denom"].toDouble();
    const double per_sample_n = data["per_sample_n"].toDouble();
    const Tensor d = saved.back();
    const size_t n_raw = saved.size() - 1 - static_cast<size_t>(n_rho);
    variable_list out(saved.size() - 1);
    const Tensor& gw = grad_outputs[0];
    if (w_denom > 0 && gw.defined()) {
      Tensor g = per_sample_n > 0 ? at::div(gw, per_sample_n) : gw;  // the constant's add passes it on
      // pow's backward is grad * (2 * p); p * (2 * grad) is the same product (doubling is exact), one op
      const Tensor g2 = at::mul(at::div(g, w_denom), 2.0);
      for (int64_t i = 0; i < n_rho; ++i) {
        if (ctx->needs_input_grad(i)) out[i] = at::mul(saved[i], g2);
      }
    }
    const Tensor& gr = grad_outputs[1];
    if (r_denom > 0 && gr.defined() && n_raw > 0) {
      Tensor g = per_sample_n > 0 ? at::div(gr, per_sample_n) : gr;
      Tensor gd = at::mul(d, at::mul(at::div(g, r_denom), 2.0));  // through sub (passes) and cat (slices)
      int64_t offset = 0;
      for (size_t k = 0; k < n_raw; ++k) {
        const Tensor& raw = saved[n_rho + k];
        const int64_t len = raw.numel();
        if (ctx->needs_input_grad(n_rho + k)) {
          out[n_rho + k] = at::softplus_backward(gd.narrow(0, offset, len).view(raw.sizes()), raw, 1, 20);
        }
        offset += len;
      }
    }
    out.resize(out.size() + 7);  // the scalar arguments
    return out;
  }
};

std::vector<Tensor> prior_terms(std::vector<Tensor> rhos, std::vector<Tensor> raws, double w_denom, double w_const,
                                double r_mu, double r_denom, double r_const, double per_sample_n, bool constants) {
  TORCH_CHECK(!rhos.empty() || !raws.empty(), "prior_terms: no parameters");
  return PriorTermsFunction::apply(at::TensorList(rhos), at::TensorList(raws), w_denom, w_const, r_mu, r_denom,
                                   r_const, per_sample_n, constants);
}

// w_coef, r_mu, r_coef: the fused prior gradients (all 0: none, the default; see AdaptiveMLPFunction's
// docstring in hacn_core/awnn/fast_node.py): dL/drho += w_coef * rho, dL/draw_l += r_coef (nu_l - mu) sigmoid(raw_l)
Tensor adaptive_mlp(Tensor x, Tensor raw, std::vector<Tensor> rhos, std::vector<Tensor> positions,
                    std::vector<int64_t> norms, int64_t activation, double slope, bool bias, double w_coef,
                    double r_mu, double r_coef) {
  TORCH_CHECK(rhos.size() == norms.size() + 1 && positions.size() == norms.size(),
              "adaptive_mlp: expected L + 1 rhos and L positions and norm widths");
  return AdaptiveMLPFunction::apply(x, raw, at::TensorList(rhos), positions, norms, activation, slope, bias, w_coef,
                                    r_mu, r_coef);
}

// ``store[r0:r1, c0:c1]`` of a 2-d store, or ``store[:, r0:r1, c0:c1]`` of a 3-d one (awnn._block)
Tensor block(const Tensor& store, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  if (store.dim() == 2) {
    const int64_t s0 = store.stride(0), s1 = store.stride(1);
    return store.as_strided({r1 - r0, c1 - c0}, {s0, s1}, r0 * s0 + c0 * s1);
  }
  const int64_t s0 = store.stride(0), s1 = store.stride(1), s2 = store.stride(2);
  return store.as_strided({store.size(0), r1 - r0, c1 - c0}, {s0, s1, s2}, r0 * s1 + c0 * s2);
}

// The tensor work of AdaptiveLinear.resize_unchecked_ and _relink (hacn_core/awnn/fast_store.py),
// the same ops in the same order (so the same random draws): rows o1..o2 (new neurons) and columns c1..c2
// (new inputs) that lie inside the never-active rectangle [0, r_hw) x [0, c_hw) are drawn
// from N(0, w_std^2) (biases from N(0, b_std^2)) and their optimizer state is zeroed; then
// rho and the optimizer-state views are re-pointed at the active block (o2, c2) of the
// stores. The bookkeeping (capacity, high water, which state to adopt) stays in Python.
// An empty tensor of another dtype than rho's, on rho's device: kept on the CPU (one per
// dtype), since a width change needs one for every resized layer
Tensor empty_of_other_dtype(const Tensor& rho) {
  const auto other = rho.scalar_type() == at::kDouble ? at::kFloat : at::kDouble;
  if (!rho.device().is_cpu()) return at::empty({0}, rho.options().dtype(other));
  thread_local Tensor for_double, for_other;
  Tensor& kept = rho.scalar_type() == at::kDouble ? for_double : for_other;
  if (!kept.defined()) kept = at::empty({0}, rho.options().dtype(other));
  return kept;
}

void resize_layer(Tensor rho, const Tensor& store, const c10::optional<Tensor>& state,
                  std::vector<Tensor> state_views, int64_t o1, int64_t o2, int64_t c1, int64_t c2, int64_t om,
                  int64_t r_hw, int64_t c_hw, double w_std, double b_std, bool has_bias) {
  at::NoGradGuard no_grad;
  const bool has_state = state.has_value() && state->defined();
  if (o2 > o1 && o1 < r_hw) {  // new neurons: their row of rho (bias and incoming weights)
    const int64_t r_end = std::min(o2, r_hw), c_end = std::min(c2, c_hw);
    block(store, o1, r_end, 0, c_end).normal_(0.0, w_std);
    if (has_bias && b_std != w_std) {
      Tensor bias = block(store, o1, r_end, 0, 1);
      if (b_std > 0) {
        bias.normal_(0.0, b_std);
      } else {
        bias.zero_();
      }
    }
    if (has_state) block(*state, o1, r_end, 0, c_end).zero_();
  }
  if (c2 > c1 && c1 < c_hw) {  // new inputs: columns of the surviving neurons
    const int64_t r_end = std::min(om, r_hw), c_end = std::min(c2, c_hw);
    block(store, 0, r_end, c1, c_end).normal_(0.0, w_std);
    if (has_state) block(*state, 0, r_end, c1, c_end).zero_();
  }
  // _relink: a parameter whose shape changes first forgets its cached AccumulateGrad node
  // (set_data with another dtype is the one path that resets it, see awnn._drop_grad_accumulator)
  // and its gradient of the old shape
  const std::vector<int64_t> shape{o2, c2};
  if (rho.sizes() != at::IntArrayRef(shape)) {
    rho.set_data(empty_of_other_dtype(rho));
    if (rho.grad().defined()) rho.mutable_grad() = Tensor();
  }
  rho.set_data(store.as_strided(shape, store.strides()));
  if (has_state) {
    const Tensor& blk = *state;
    const std::vector<int64_t> stride{blk.stride(1), blk.stride(2)};
    for (size_t k = 0; k < state_views.size(); ++k) {
      state_views[k].set_(blk.storage(), static_cast<int64_t>(k) * blk.stride(0), shape, stride);
    }
  }
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("adaptive_mlp", &adaptive_mlp,
        "AWNN's adaptive MLP (Eq. 14): forward with a fused hand-written backward, one autograd node",
        pybind11::arg("x"), pybind11::arg("raw"), pybind11::arg("rhos"), pybind11::arg("positions"),
        pybind11::arg("norms"), pybind11::arg("activation"), pybind11::arg("slope"), pybind11::arg("bias"),
        pybind11::arg("w_coef") = 0.0, pybind11::arg("r_mu") = 0.0, pybind11::arg("r_coef") = 0.0);
  m.def("prior_terms", &prior_terms,
        "the weight and width priors of Eq. 13 in closed form, one autograd node (values and gradients of the "
        "autograd composition, bit for bit)");
  m.def("resize_layer", &resize_layer,
        "the tensor work of AdaptiveLinear._resize: draw new rows and columns, zero their optimizer state, re-point "
        "rho and the state views at the active block");
}
