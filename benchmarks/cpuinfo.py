"""What the result files say about the CPU they ran on (bench.py, predict/bench_predict.py,
quality/protocol_a.py): BF16 runs differ between CPUs with AMX, with AVX512-BF16 only, and
without either, so every CPU figure names the CPU and its ISA."""

import platform


def _fields():
    """The first processor's /proc/cpuinfo fields ({} where there is none)."""
    fields = {}
    try:
        for line in open("/proc/cpuinfo"):
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def cpu_model():
    """The model name with its family and model numbers: a VM may report only "AMD EPYC", and
    family 25 model 17 is what says Zen 4 (Genoa)."""
    f = _fields()
    name = f.get("model name", platform.processor())
    if "cpu family" in f and "model" in f:
        name += f" (family {f['cpu family']}, model {f['model']})"
    return name


def cpu_isa():
    """The CPU's BF16 instructions as /proc/cpuinfo names them (amx_bf16, avx512_bf16)."""
    have = _fields().get("flags", "").split()
    return [f for f in ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f") if f in have]
