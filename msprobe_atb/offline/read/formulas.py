"""The metrics' formulas as compare's and replay's --help epilog say them (the
full definitions: metrics.py's docstring). Apart from metrics.py so the CLI
shows them without loading the native kernel."""

# maxima over elements finite on both sides
FORMULAS = """metrics (g golden or replay's float64 recompute, t target):
  cosine            g.t / (|g| |t|)
  max_abs_err       max |t - g|
  max_rel_err       max |(t - g) / g|; where g = 0 both g and t get +eps first;
                    float32 (eps 2^-23) if both are <= 32-bit floats, else float64
                    (eps 2^-52): msProbe's Max Relative Err
  max_rel_err_atol  max |t - g| / max(|g|, atol)   (compare only)
  rmse              sqrt(mean((t - g)^2)); rel_rmse = rmse / rms(g)
  within_tol        share of elements with |t - g| <= atol + rtol |g|
compare, as msProbe's compare -m atb: cosine, max_abs_err, max_rel_err empty where NaN/Inf
sit at different positions, cosine also for one element; golden_mean, target_mean
in float32, rounded to fp16/bf16 for those; a statistic empty where the tensor
holds NaN"""
