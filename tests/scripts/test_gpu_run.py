"""scripts/gpu-run's pure parts: Nsight Compute's CSV, steps in a window, floors, the commit.
Standard library only; no GPU. Run: python3 -m unittest discover -s tests/scripts -p 'test_*.py'"""
import importlib.machinery
import importlib.util
import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
loader = importlib.machinery.SourceFileLoader("gpu_run", os.path.join(ROOT, "scripts", "gpu-run"))
spec = importlib.util.spec_from_loader("gpu_run", loader)
R = importlib.util.module_from_spec(spec)
loader.exec_module(R)
H100 = "NVIDIA H100 80GB HBM3"
PROFILE = os.path.join(ROOT, "benchmarks", "results", "gpu", "2026-11-28-h100", "profile-dsstne-bench.txt")


def dsstne_model():
    return R.step_model.model(os.path.join(ROOT, "configs", "dsstne-bench.json"), batch=256, items=27278,
                              mean_nnz=20000263 / 138493)


def launches_csv(step, count, offset=0):
    """A per-launch CSV as ncu --csv prints it: one row per launch and metric."""
    head = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
            '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
    rows = ["==PROF== Connected to process 1", "program output", head]
    for i in range(count):
        name, grid, us = step[(i + offset) % len(step)]
        rows.append(f'"{i}","1","p","h","{name}","1","7","(256, 1, 1)","{grid}","0","9.0",'
                    f'"Command line profiler metrics","gpu__time_duration.sum","usecond","{us:,.2f}"')
    return "\n".join(rows) + "\n==PROF== Disconnected\n"


class NcuCsv(unittest.TestCase):
    def test_the_2026_11_28_summary_gives_22_steps_and_floors_for_the_largest(self):
        with open(PROFILE) as f:
            launches = R.parse_ncu_csv(f.read())
        self.assertEqual(len(launches), 29)  # kernels (name and grid) in the summary
        summary = R.per_step(launches)
        self.assertEqual(summary["steps"], 22)
        text, js = R.profile_report(launches, dsstne_model(), H100, "test")
        largest = {row["kernel"]: row for row in js["largest"]}
        self.assertEqual(len(largest), 5)
        # The output layer's three GEMMs, matched by their results' areas: the weight gradient
        # (1024 x 27278, with SGD), the forward (256 x 27278) and the input delta (256 x 1024,
        # k = 27278, split-K 16), each 14.3 GFLOP: 29 us at 494.7 TFLOP/s, memory-bound above it.
        gemm = [r for k, r in largest.items() if "gemm" in k]
        self.assertEqual(len(gemm), 3)
        for r in gemm:
            self.assertIsNotNone(r["floor_us"], r)
            self.assertGreater(r["floor_us"], 28.9)
            self.assertLess(r["floor_us"], r["us_per_step"])
        self.assertIn("gemm weight gradient + SGD 4", largest[next(k for k in largest if "128x128" in k)]["floor_basis"])
        self.assertIn("gemm input delta 4", largest[next(k for k in largest if "tn_align1" in k)]["floor_basis"])
        self.assertIn("gemm forward 4", largest[next(k for k in largest if "nn_align1" in k)]["floor_basis"])
        tile = largest["tile_sum_kernel"]
        self.assertIn("input weight gradient", tile["floor_basis"])
        self.assertGreater(tile["floor_us"], 0)
        self.assertIn("the five largest beside their floors", text)

    def test_per_launch_rows_are_cut_to_whole_steps(self):
        step = [("a_kernel(int)", "(1, 1, 1)", 10.0), ("b_kernel(int)", "(2, 1, 1)", 20.0),
                ("a_kernel(int)", "(1, 1, 1)", 10.0), ("c_kernel(int)", "(4, 1, 1)", 5.0)]
        launches = R.parse_ncu_csv(launches_csv(step, 4 * 10 + 3, offset=1))
        self.assertEqual(len(launches), 43)
        summary = R.per_step(launches)
        self.assertEqual(summary["steps"], 10)
        self.assertIn("4 launches per step", summary["how"])
        by_name = {k["name"]: k for k in summary["kernels"]}
        self.assertAlmostEqual(by_name["a_kernel(int)"]["us_per_step"], 20.0)
        self.assertAlmostEqual(by_name["a_kernel(int)"]["per_step"], 2.0)
        self.assertAlmostEqual(by_name["b_kernel(int)"]["us_per_step"], 20.0)
        self.assertAlmostEqual(by_name["c_kernel(int)"]["us_per_step"], 5.0)
        # An unknown device: the table, no floors.
        text, js = R.profile_report(launches, dsstne_model(), "Some GPU", "test")
        self.assertTrue(all(r["floor_us"] is None for r in js["largest"]))

    def test_no_table_gives_no_launches(self):
        self.assertEqual(R.parse_ncu_csv("==ERROR== Failed to profile\n"), [])

    def test_kernel_names_lose_their_parameters(self):
        self.assertEqual(R.short("void sparsenet::<unnamed>::k<1>(formulas::P, const float *)"), "void k<1>")

    def test_peaks_by_device(self):
        self.assertEqual(R.peaks("NVIDIA H200")["bandwidth"], 4.8e12)
        self.assertEqual(R.peaks(H100)["bandwidth"], 3.35e12)
        self.assertEqual(R.peaks("NVIDIA H100 PCIe")["bandwidth"], 2.0e12)
        self.assertIsNone(R.peaks("NVIDIA L4"))


class Resume(unittest.TestCase):
    def test_only_parts_not_run_or_cut_run_again(self):
        for status in ("ok", "failed: 1 failed, 0 skipped", "error", "timeout", "skipped: no GPU"):
            self.assertTrue(R.done({"status": status}), status)
        for status in ("not run: needs about 90 s, 40 s left before the deadline", "cut by the deadline", ""):
            self.assertFalse(R.done({"status": status}), status)


class TreeCommit(unittest.TestCase):
    def git(self, *args, cwd):
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                       env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                                GIT_COMMITTER_EMAIL="t@t"))

    def test_a_tree_inside_another_repository_reports_no_commit(self):
        with tempfile.TemporaryDirectory() as d:
            self.git("init", "-q", cwd=d)
            self.git("commit", "-q", "--allow-empty", "-m", "x", cwd=d)
            inner = os.path.join(d, "copied-tree")
            os.makedirs(inner)
            commit, why = R.V.tree_commit(inner)
            self.assertIsNone(commit)
            self.assertIn("inside another repository", why)
            commit, why = R.V.tree_commit(d)
            self.assertRegex(commit, "^[0-9a-f]{40}$")
            self.assertIsNone(why)

    def test_no_repository_reports_no_commit(self):
        with tempfile.TemporaryDirectory() as d:
            commit, why = R.V.tree_commit(d)
            self.assertIsNone(commit)
            self.assertIn("not a git checkout", why)


if __name__ == "__main__":
    unittest.main()
