"""Special functions on dense grids over their whole float32 and float64
domains, against the CPU, in ulps.

The grid holds every binade from the smallest normal number to the largest
finite one, `per_octave` points in each, both signs, plus a fine grid over
[-40, 40] (poles, zeros and the series/asymptotic switch points). Subnormal
inputs are left out and a subnormal CPU result read as 0 is accepted: the
platform flushes subnormals to zero (torchtpu.platform_info(), README "Known
limits").

A float32 element passes when the device is within F32_ULPS of the CPU, or
at most twice as far (plus F32_ULPS) from the float64 value (the CPU's
float64 kernel rounded to float32) as the CPU's float32 kernel is: near a
function's zeros and in cancellations (ndtr's left tail) both float32
results are far from the truth, and the device must not be clearly the worse
of the two. Float64 elements are compared with the CPU alone, within
F64_ULPS. LOOSER gives, with its reason, each wider tolerance (ulps, or an
absolute one next to zeros, in cancellations and in a rounded phase).

    python tests/opinfo/special_grid.py [--dtypes f32,f64] [--per-octave 64] [--functions digamma,erf]

prints one JSON line per function and dtype: elements, failures, the worst
element.
"""
import argparse
import json
import math

import torch

import torchtpu  # noqa: F401  (the tpu device)

S = torch.special
FUNCTIONS = {
    "digamma": S.digamma, "lgamma": torch.lgamma, "erf": S.erf, "erfc": S.erfc, "erfcx": S.erfcx,
    "erfinv": S.erfinv, "i0": S.i0, "i0e": S.i0e, "i1": S.i1, "i1e": S.i1e, "ndtr": S.ndtr, "ndtri": S.ndtri,
    "log_ndtr": S.log_ndtr, "bessel_j0": S.bessel_j0, "bessel_j1": S.bessel_j1, "bessel_y0": S.bessel_y0,
    "bessel_y1": S.bessel_y1, "modified_bessel_i0": S.modified_bessel_i0, "modified_bessel_i1": S.modified_bessel_i1,
    "modified_bessel_k0": S.modified_bessel_k0, "modified_bessel_k1": S.modified_bessel_k1,
    "scaled_modified_bessel_k0": S.scaled_modified_bessel_k0, "scaled_modified_bessel_k1": S.scaled_modified_bessel_k1,
    "airy_ai": S.airy_ai, "spherical_bessel_j0": S.spherical_bessel_j0, "entr": S.entr, "sinc": S.sinc,
    "expit": S.expit, "logit": S.logit, "expm1": S.expm1, "log1p": S.log1p, "exp2": S.exp2,
    "trigamma": lambda x: S.polygamma(1, x), "polygamma_3": lambda x: S.polygamma(3, x),
    "multigammaln": lambda x: S.multigammaln(x.abs() + 2, 3),
}
F32_ULPS = 4
F64_ULPS = 8
# (name, dtype): (ulps, absolute tolerance, why) where one needs more.
LOOSER = {
    ("erfc", "float32"): (8, 0, "XLA's float32 erfc, 6 ulps from glibc's at 0.9"),
    ("erfcx", "float32"): (10, 0, "exp(x^2) times XLA's float32 erfc below 2 (7 ulps)"),
    ("erfcx", "float64"): (16, 0, "exp(x^2) times XLA's float64 erfc below 2 (11 ulps at 0.86)"),
    ("erfinv", "float32"): (12, 0, "Newton steps on XLA's erf and erfc next to |y| = 0.96"),
    ("erfinv", "float64"): (24, 0, "Newton steps next to |y| = 1, where erf' is small"),
    ("log_ndtr", "float32"): (12, 0, "log1p of XLA's float32 erfc below 2 (7 ulps)"),
    ("modified_bessel_k0", "float32"): (8, 0, "Cephes' Chebyshev sum less log(x / 2) i0(x) at 1.5"),
    ("scaled_modified_bessel_k0", "float32"): (8, 0, "Cephes' Chebyshev sum times exp(x) at 1.7"),
    ("expm1", "float32"): (8, 0, "XLA's float32 expm1, 5 ulps at 0.11"),
    ("ndtr", "float32"): (F32_ULPS, 1e-7, "PyTorch's composite 0.5 (1 + erf(x / sqrt 2)) cancels in the left tail: "
                                        "an ulp of erf at 1 is thousands of the result's"),
    ("ndtr", "float64"): (F64_ULPS, 2e-16, "the same composite in float64"),
    ("digamma", "float32"): (F32_ULPS, 1e-6, "next to its zeros between the poles the reflection pi / tan(pi x) "
                                          "cancels against digamma(1 - x) (about 2.5)"),
    ("digamma", "float64"): (F64_ULPS, lambda x, cpu: digamma_pole_tolerance(x, cpu),
                             "next to its zeros the result cancels; next to its poles the CPU's tan(pi x) is off"),
    ("bessel_y0", "float32"): (F32_ULPS, 1e-7, "next to its zeros (x = 3.958) the result cancels"),
    ("bessel_y1", "float32"): (F32_ULPS, 1e-7, "next to its zeros (x = 2.197) the result cancels"),
    ("bessel_y0", "float64"): (F64_ULPS, 1e-15, "next to its zeros (x = 3.958) the result cancels"),
    ("bessel_y1", "float64"): (F64_ULPS, 1e-15, "next to its zeros (x = 2.197) the result cancels"),
    ("airy_ai", "float32"): (F32_ULPS, 2e-7, "below 2.09 the power series f c1 - g c2 cancels (to 0.048 from 0.75)"),
    ("lgamma", "float64"): (F64_ULPS, lambda x, cpu: torch.where(x > 2.5e305, math.inf, 1e-14),
                            "XLA's lgamma next to its zeros on the negative axis (x = -2.457); past 2.5e305 the "
                            "CPU's overflows to inf before the true value (1.8e308 there) does"),
    ("log_ndtr", "float64"): (F64_ULPS, 1e-15, "XLA's float64 erfc past 20 (5e-14 relative, at 1e-240)"),
    ("polygamma_3", "float64"): (F64_ULPS, 1e-230, "past 1e80 x^4 overflows where the CPU's result is 1e-242"),
    ("bessel_j1", "float64"): (F64_ULPS, 1e-307, "x / 2 next to the smallest normal number"),
}


def digamma_pole_tolerance(x, cpu):
    """Next to its zeros digamma cancels (1e-14); next to its poles the CPU
    takes tan(pi x) of the unreduced x, whose rounding costs it about
    |x| / |x - round(x)| ulps (the device reduces x - round(x) exactly)."""
    r = (x - x.round()).abs().double().clamp_min(2.0**-52)
    return 1e-14 + 8 * 2.0**-52 * cpu.double().abs() * (1 + x.double().abs() / r)


def airy_phase_tolerance(x, cpu):
    """Ai(x) ~ |x|^(-1/4) sin(zeta + pi/4) / sqrt(pi) on the negative axis and
    exp(-zeta) / (2 sqrt(pi) x^(1/4)) on the positive one, with zeta =
    (2/3)|x|^1.5, which each side rounds once (XLA multiplies by 1/3 where the
    CPU divides by 3): an ulp of zeta moves the result by eps zeta times the
    amplitude (negative axis) or the result (positive axis). Past |x| = 1e10
    no digit of zeta is correct in either. Between, the power series
    f c1 - g c2 cancels (to 0.03 from 0.75 at x = 2): 8 ulps of 0.75."""
    ax = x.double().abs()
    zeta = (2 / 3) * ax**1.5
    amplitude = torch.where(x < 0, ax**-0.25 / math.sqrt(math.pi), cpu.double().abs())
    return torch.where(ax > 2.09, 8 * 2.0**-52 * zeta * amplitude, 8 * 2.0**-52 * 0.75)


LOOSER[("airy_ai", "float64")] = (F64_ULPS, airy_phase_tolerance, airy_phase_tolerance.__doc__)
LOOSER[("multigammaln", "float64")] = (32, 0, "three lgammas and a constant summed in another order than the CPU's")


def grid(dtype, per_octave=64):
    fi = torch.finfo(dtype)
    m = torch.linspace(0.5, 1.0, per_octave + 1, dtype=torch.float64)[:-1]
    e = torch.arange(math.frexp(fi.tiny)[1], math.frexp(fi.max)[1] + 1, dtype=torch.float64)
    v = (m[None, :] * torch.pow(2.0, e)[:, None]).flatten().to(dtype)
    v = v[torch.isfinite(v)]
    fine = torch.linspace(-40, 40, 80 * max(per_octave, 8) * 4 + 1, dtype=torch.float64).to(dtype)
    v = torch.cat([v, -v, fine, torch.tensor([0.0, -0.0], dtype=dtype)]).unique()
    return v[(v == 0) | (v.abs() >= fi.tiny)]


def ulps(got, ref):
    """|got - ref| in units of ref's spacing; 0 where equal (NaN with NaN, or both
    below twice the smallest normal); inf where only one is NaN or infinite."""
    dt = ref.dtype
    tiny = torch.finfo(dt).tiny
    spacing = torch.nextafter(ref.abs(), torch.tensor(math.inf, dtype=dt)) - ref.abs()
    spacing = torch.where(spacing > 0, spacing, torch.tensor(tiny, dtype=dt)).double()
    d = (got.double() - ref.double()).abs() / spacing
    # Below twice the smallest normal a result is one rounding from a subnormal, which may have been flushed.
    flushed = (ref.abs() < 2 * tiny) & (got.abs() < 2 * tiny)
    equal = (got == ref) | (torch.isnan(got) & torch.isnan(ref)) | flushed
    d = torch.where(equal, torch.zeros_like(d), d)
    return torch.where(torch.isnan(d) | (torch.isinf(got) != torch.isinf(ref)), torch.full_like(d, math.inf), d)


def check(name, dtype, per_octave=64):
    """The grid's failures for one function and dtype (see the module doc)."""
    f = FUNCTIONS[name]
    x = grid(dtype, per_octave)
    cpu = f(x)
    got = f(x.to("tpu")).cpu()
    d = ulps(got, cpu)
    dname = str(dtype).replace("torch.", "")
    tol, atol, _ = LOOSER.get((name, dname), (F32_ULPS if dtype == torch.float32 else F64_ULPS, 0, ""))
    atol = atol(x, cpu) if callable(atol) else atol
    bad = (d > tol) & ~((got.double() - cpu.double()).abs() <= atol)
    if dtype == torch.float32:
        truth = f(x.double()).float()
        bad &= ulps(got, truth) > 2 * ulps(cpu, truth) + tol
    out = {"fn": name, "dtype": dname, "n": x.numel(), "failures": int(bad.sum())}
    if out["failures"]:
        i = int(torch.nonzero(bad)[torch.argmax(torch.nan_to_num(d[bad], posinf=1e300))])
        out.update(x=float(x[i]), cpu=float(cpu[i]), tpu=float(got[i]), ulps=float(d[i]))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="f32,f64")
    p.add_argument("--per-octave", type=int, default=64)
    p.add_argument("--functions", default=",".join(FUNCTIONS))
    a = p.parse_args()
    for dt in a.dtypes.split(","):
        for name in a.functions.split(","):
            print(json.dumps(check(name, {"f32": torch.float32, "f64": torch.float64}[dt], a.per_octave)), flush=True)


if __name__ == "__main__":
    main()
