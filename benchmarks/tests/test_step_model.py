"""benchmarks/step_model.py: the bytes of a step, checked against sums worked out by hand on a
small network, and the relations between its variants (python3 -m unittest; ctest runs it as
StepModel.Unit)."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import step_model  # noqa: E402


def tiny_config(path, optimizer="SGD"):
    # 10 inputs -> 4 (Sigmoid) -> 10 outputs: every pass small enough to add up by hand.
    cfg = {"Layers": [
        {"Name": "In", "Kind": "Input", "N": "auto", "DataSet": "x", "Sparse": True},
        {"Name": "H", "Kind": "Hidden", "N": 4, "Activation": "Sigmoid"},
        {"Name": "Out", "Kind": "Output", "N": "auto", "DataSet": "y", "Activation": "Sigmoid"}],
        "Training": {"Optimizer": optimizer}}
    with open(path, "w") as fh:
        json.dump(cfg, fh)


class StepModel(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.config = os.path.join(self.dir.name, "net.json")

    def tearDown(self):
        self.dir.cleanup()

    def tiny(self, optimizer="SGD"):
        tiny_config(self.config, optimizer)
        # batch 2, 3 entries per row, 5 distinct input rows per batch, 10 items.
        return step_model.model(self.config, batch=2, mean_nnz=3, items=10, distinct=5)

    def test_fused_sgd_by_hand(self):
        m = self.tiny()
        f = 4
        B, n_in, n1, n_out, entries, distinct = 2, 10, 4, 10, 6, 5
        expected = (
            distinct * n1 * f + entries * 8 + B * n1 * f            # input gather
            + 2 * B * n1 * f                                          # hidden epilogue
            + (B * n1 + n1 * n_out) * f + B * n_out * f               # gemm forward 2
            + B * n_out * f + entries * 8 + B * n_out * f             # output epilogue
            + (B * n1 + B * n_out + n1 * n_out) * f + n1 * n_out * f  # dW GEMM with SGD
            + (B * n_out + n1 * n_out) * f + B * n1 * f               # gemm input delta
            + 3 * B * n1 * f                                          # derivative + sums
            + entries * 8 + B * n1 * f + 2 * distinct * n1 * f)       # input grad + update
        self.assertEqual(step_model.bytes_per_step(m), expected)
        self.assertEqual(n_in, m["sizes"][0])

    def test_unfused_moves_more_and_sgd_fusion_saves_the_gradient_round_trip(self):
        m = self.tiny()
        fused = dict((n, r + w) for n, r, w in step_model.passes(m, True))
        unfused = dict((n, r + w) for n, r, w in step_model.passes(m, False))
        self.assertGreater(step_model.bytes_per_step(m, False), step_model.bytes_per_step(m))
        w = 4 * 10 * 4
        # Unfused: the GEMM writes g (w), the optimizer reads g and W and writes W (3 w); fused:
        # the GEMM reads and writes W (2 w): one w less... plus the separate optimizer pass.
        self.assertEqual(unfused["gemm weight gradient 2"] + unfused["optimizer 2"]
                         - fused["gemm weight gradient + SGD 2"], 2 * w)

    def test_state_slots_add_their_reads_and_writes(self):
        sgd, adam = self.tiny("SGD"), self.tiny("Adam")
        self.assertEqual(adam["optimizer"], "adam")
        w = 4 * 10 * 4
        rows = 5 * 4 * 4
        # Adam (2 slots): the dense matrix's epilogue reads and writes both moments and the
        # GEMM writes g that the epilogue reads (fused SGD reads and writes W only inside the
        # GEMM); the sparse rows gain 2 slots read and written.
        diff = step_model.bytes_per_step(adam) - step_model.bytes_per_step(sgd)
        self.assertEqual(diff, (w + 4 * w + 3 * w - 2 * w) + 4 * rows)

    def test_floor_is_bytes_over_bandwidth_per_batch(self):
        m = self.tiny()
        b = step_model.bytes_per_step(m)
        self.assertAlmostEqual(step_model.floor_seconds(m, 1e9), b / 1e9)
        self.assertAlmostEqual(step_model.floor_seconds(m, 1e9, examples=5), 3 * b / 1e9)

    def test_dsstne_bench_is_dominated_by_the_output_layer(self):
        m = step_model.model("dsstne-bench")
        self.assertEqual(m["sizes"], [27278, 1024, 1024, 1024, 27278])
        total = step_model.bytes_per_step(m)
        w_out = 1024 * 27278 * 4
        # The output weights are read twice (forward, input delta) and read and written once by
        # the fused update: 4 passes over 112 MB of the step's 0.9 GB (uniform items).
        self.assertGreater(total, 4 * w_out)
        self.assertLess(total, 9 * w_out)

    def bf16_minus_fp32(self, precision, optimizer="SGD"):
        tiny_config(self.config, optimizer)
        m = {p: step_model.model(self.config, batch=2, mean_nnz=3, items=10, distinct=5,
                                 precision=p) for p in ("fp32", precision)}
        return step_model.bytes_per_step(m[precision]) - step_model.bytes_per_step(m["fp32"])

    def test_bf16_by_hand(self):
        # The tiny network's GEMMs: forward a1 [2, 4] . W [4, 10]; the weight gradient
        # a1^T . dz [2, 10] with the SGD step (C = W, 160 B read and written); the input delta
        # dz . W^T. A conversion reads 4 B and writes 2 B an element, a GEMM reads 2 B.
        a1, dz, w = 8, 20, 40  # elements
        conv = 6  # bytes per converted element
        # bf16-weight-copies: W's copy (read 2 B, written by a conversion pass after the fused
        # step: 4 + 2 B); a1 and dz converted per GEMM.
        forward = (conv * a1 + 2 * (a1 + w)) - 4 * (a1 + w)
        gradient = (conv * (a1 + dz) + 2 * (a1 + dz) + 4 * w) + conv * w - (4 * (a1 + dz) + 4 * w)
        delta = (conv * dz + 2 * (dz + w)) - 4 * (dz + w)
        self.assertEqual(self.bf16_minus_fp32("bf16-weight-copies"), forward + gradient + delta)
        self.assertEqual(forward + gradient + delta, 304)
        # bf16 (the engine now): a1 and dz written once in BF16 by their producers (2 B), every
        # GEMM reads 2 B; W's copy as above.
        now = (2 * a1 + 2 * (a1 + w) - 4 * (a1 + w)) \
            + (2 * dz + 2 * (a1 + dz) + 4 * w + conv * w - (4 * (a1 + dz) + 4 * w)) \
            + (2 * (dz + w) - 4 * (dz + w))
        self.assertEqual(self.bf16_minus_fp32("bf16"), now)
        gone, added = step_model.conversions_gone(
            step_model.model(self.config, batch=2, mean_nnz=3, items=10, distinct=5))
        self.assertEqual(len(gone), 4)  # a1 twice, dz twice
        self.assertEqual(sum(b for _, b in gone), conv * (2 * a1 + 2 * dz))
        self.assertEqual(added, 2 * (a1 + dz))
        # Before issue 46 every GEMM converted W too (6 B), and read it as BF16 (2 B).
        per_gemm = (forward + conv * w) + (gradient - conv * w) + (delta + conv * w)
        self.assertEqual(self.bf16_minus_fp32("bf16-per-gemm"), per_gemm)
        # Adam: the optimizer's pass writes the copy (2 B a weight); the GEMM writes g.
        adam_gradient = conv * (a1 + dz) + 2 * (a1 + dz) - 4 * (a1 + dz) + 2 * w
        self.assertEqual(self.bf16_minus_fp32("bf16-weight-copies", "Adam"),
                         forward + adam_gradient + delta)
        # bf16-fused: a1 and dz written once in BF16 by their producers (2 B), every GEMM reads
        # 2 B; the step's GEMM writes W's copy in its epilogue (2 B a weight).
        fused = (2 * a1 + 2 * (a1 + w) - 4 * (a1 + w)) \
            + (2 * dz + 2 * (a1 + dz) + 2 * w - 4 * (a1 + dz)) + (2 * (dz + w) - 4 * (dz + w))
        self.assertEqual(self.bf16_minus_fp32("bf16-fused"), fused)

    def test_bf16_on_dsstne_bench_between_per_gemm_and_fused(self):
        b = {p: step_model.bytes_per_step(step_model.model("dsstne-bench", precision=p))
             for p in step_model.PRECISIONS}
        self.assertLess(b["bf16"], b["bf16-weight-copies"])
        self.assertLess(b["bf16-weight-copies"], b["bf16-per-gemm"])
        self.assertLess(b["bf16-fused"], b["bf16"])
        self.assertLess(b["bf16-fused"], b["fp32"])
        with self.assertRaises(ValueError):
            step_model.model("dsstne-bench", precision="fp16")

    def test_expected_distinct(self):
        self.assertAlmostEqual(step_model.expected_distinct(0, 10), 0.0)
        self.assertLess(step_model.expected_distinct(10, 10), 10)
        self.assertGreater(step_model.expected_distinct(1000, 10), 9.99)


if __name__ == "__main__":
    unittest.main()
