#!/usr/bin/env python3
"""A serving process's memory while it loads and after: `sparsenet serve` started on a model (with
the flags given), its resident memory (VmRSS) and peak (VmHWM) read from /proc once /health
answers, then once more after a POST /reload has loaded the model a second time (the reload's peak
holds the old model and the new one's load). Prints one JSON object.

    load_memory.py --cli build/sparsenet --model M.nc -- --ann M.ann --bf16-input-weights
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time


def status(pid):
    text = open(f"/proc/{pid}/status").read()
    return {k: int(re.search(rf"{k}:\s+(\d+)", text)[1]) * 1024 for k in ("VmRSS", "VmHWM")}


def get(url, method="GET"):
    r = subprocess.run(["curl", "-s", "-X", method, "-o", "/dev/null", "-w", "%{http_code}", url],
                       capture_output=True, text=True)
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default="build/sparsenet")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--label", default="")
    ap.add_argument("flags", nargs="*", help="serve's flags (after --)")
    a = ap.parse_args()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = f"http://127.0.0.1:{port}"
    start = time.time()
    proc = subprocess.Popen([a.cli, "serve", "-n", a.model, "--port", str(port), "--threads",
                             str(a.threads)] + a.flags, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        while get(url + "/health") != "200":
            if proc.poll() is not None:
                sys.exit("serve exited: " + proc.stdout.read())
            time.sleep(0.2)
        loaded_s = time.time() - start
        first = status(proc.pid)
        code = get(url + "/reload", "POST")
        reload = status(proc.pid)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=120)
    result = {
        "label": a.label, "model": a.model, "flags": a.flags, "threads": a.threads,
        "load_seconds": round(loaded_s, 2),
        "rss_bytes": first["VmRSS"], "peak_bytes": first["VmHWM"],
        "peak_over_rss": round(first["VmHWM"] / first["VmRSS"], 3),
        "reload_status": code, "rss_after_reload_bytes": reload["VmRSS"],
        "peak_after_reload_bytes": reload["VmHWM"],
        "reload_peak_over_two_models": round(reload["VmHWM"] / (2 * first["VmRSS"]), 3),
        "log": [l for l in out.splitlines() if "loaded" in l or "bf16" in l][:4],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
