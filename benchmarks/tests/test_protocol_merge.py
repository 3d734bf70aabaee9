"""benchmarks/quality/protocol_a.py --merge: seeds of one configuration run apart, joined into the
file one run over all of them writes (standard library only)."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quality", "protocol_a.py")
CONFIG = {"Name": "a config", "Layers": [{"Name": "Input", "N": "auto"}]}


def seed_run(seed, test, validation, epoch, config=CONFIG):
    return {"seed": seed, "config": "configs/x.json", "config_json": config, "train_flags": "",
            "epochs": 40, "chosen_epoch": epoch, "validation_recall@20": validation,
            "test_recall@20": test, "test_ndcg@20": test / 2, "test_best_epoch": epoch,
            "test_best_recall@20": test + 0.001, "test_best_ndcg@20": test / 2,
            "train_seconds_per_epoch": 20.0 + seed, "validation_curve": [], "test_curve": []}


def result(runs, commit, date, benchmark="quality-gowalla"):
    model = {k: runs[0][k] for k in ("config", "config_json", "train_flags", "epochs")}
    model.update({"test_recall@20": runs[0]["test_recall@20"], "per_seed": runs})
    return {"benchmark": benchmark, "protocol": "A", "date": date, "machine": "vm", "threads": 2,
            "commit": commit, "published": {"SimpleX": [0.1872, 0.1557]},
            "validation": f"10% of train per user, seed {runs[0]['seed']}",
            "seeds": [r["seed"] for r in runs], "model": model}


class Merge(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, data):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            json.dump(data, f)
        return path

    def merge(self, *paths):
        out = os.path.join(self.dir.name, "merged.json")
        r = subprocess.run([sys.executable, SCRIPT, "--merge", *paths, "--out", out],
                           capture_output=True, text=True)
        return r, out

    def test_seeds_run_apart_give_the_means_spreads_and_provenance_of_one_run(self):
        a = self.write("a.json", result([seed_run(1, 0.1905, 0.2315, 38)], "aaa", "2026-11-28"))
        b = self.write("b.json", result([seed_run(3, 0.1899, 0.2301, 36),
                                         seed_run(2, 0.1911, 0.2320, 40)], "bbb", "2026-11-29"))
        r, out = self.merge(b, a)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = json.load(open(out))
        self.assertEqual(m["seeds"], [1, 2, 3])
        self.assertEqual(m["benchmark"], "quality-gowalla")
        self.assertEqual(m["date"], "2026-11-29")
        tests = [0.1905, 0.1911, 0.1899]
        self.assertAlmostEqual(m["model"]["test_recall@20"], statistics.fmean(tests))
        self.assertAlmostEqual(m["model"]["test_recall@20_std"], statistics.stdev(tests))
        self.assertEqual(m["model"]["test_recall@20_range"], [0.1899, 0.1911])
        self.assertAlmostEqual(m["model"]["validation_recall@20"],
                               statistics.fmean([0.2315, 0.2320, 0.2301]))
        self.assertEqual(m["model"]["chosen_epoch"], 38)
        self.assertEqual([s["commit"] for s in m["model"]["per_seed"]], ["aaa", "bbb", "bbb"])
        self.assertEqual([s["date"] for s in m["model"]["per_seed"]],
                         ["2026-11-28", "2026-11-29", "2026-11-29"])
        self.assertEqual(sorted(s["file"].endswith(("a.json", "b.json"))
                                for s in m["merged_from"]), [True, True])
        self.assertEqual(m["model"]["config_json"], CONFIG)

    def test_a_different_config_is_refused_by_file_and_field(self):
        a = self.write("a.json", result([seed_run(1, 0.19, 0.23, 38)], "aaa", "2026-11-28"))
        other = dict(CONFIG, Name="another config")
        b = self.write("b.json", result([seed_run(2, 0.19, 0.23, 38, other)], "b", "2026-11-28"))
        r, out = self.merge(a, b)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("b.json: model.config_json differs", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_split_flags_are_part_of_the_configuration(self):
        def temporal(seed, flags):
            one = dict(seed_run(seed, 0.19, 0.23, 38), split_flags=flags)
            r = result([one], "aaa", "2026-11-29")
            r["model"]["split_flags"] = flags
            return r
        flags = "--carve-from last --recency 10"
        a = self.write("a.json", temporal(1, flags))
        b = self.write("b.json", temporal(2, flags))
        r, out = self.merge(a, b)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.load(open(out))["model"]["split_flags"], flags)
        c = self.write("c.json", temporal(3, "--carve-from last --recency 20"))
        r, _ = self.merge(a, c)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("c.json: model.split_flags differs", r.stderr)
        plain = self.write("plain.json", result([seed_run(4, 0.19, 0.23, 38)], "d", "2026-11-29"))
        r, _ = self.merge(a, plain)
        self.assertIn("plain.json: model.split_flags differs", r.stderr)

    def test_a_seed_twice_another_dataset_and_an_unseeded_run_are_refused(self):
        a = self.write("a.json", result([seed_run(1, 0.19, 0.23, 38)], "aaa", "2026-11-28"))
        again = self.write("again.json", result([seed_run(1, 0.18, 0.22, 30)], "c", "2026-11-29"))
        r, _ = self.merge(a, again)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("again.json: seed 1 is in two of the files", r.stderr)

        yelp = self.write("yelp.json", result([seed_run(2, 0.07, 0.12, 25)], "d", "2026-11-28",
                                              benchmark="quality-yelp2018"))
        r, _ = self.merge(a, yelp)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("yelp.json: benchmark is 'quality-yelp2018'", r.stderr)

        unseeded = result([seed_run(2, 0.19, 0.23, 38)], "e", "2026-11-28")
        del unseeded["seeds"]
        r, _ = self.merge(a, self.write("unseeded.json", unseeded))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("unseeded.json: a run without --seeds", r.stderr)

        r, _ = self.merge(a, os.path.join(self.dir.name, "missing.json"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("missing.json: not a readable result file", r.stderr)


if __name__ == "__main__":
    unittest.main()
