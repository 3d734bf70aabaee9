#!/usr/bin/env bash
# Two ranks on two "hosts" that share no memory transport: two network namespaces joined by a
# veth pair (10.77.0.1 and 10.77.0.2), Open MPI restricted to the tcp,self transports, its remote
# daemon started through `ip netns exec` (plm_rsh_agent) instead of ssh. Trains the same network
# on one process and across the two hosts and checks that the losses and the predictions agree.
# Needs root (network namespaces). Usage: two_hosts.sh BUILD_DIR [OUT_DIR]
# Exit codes: 0 agreed; 77 cannot create namespaces here (skipped); other: failed.
set -euo pipefail
build=$(realpath "${1:-build}")
cli="$build/sparsenet"
out=${2:-$(mktemp -d)}
mkdir -p "$out"
ns1=sn_host1_$$
ns2=sn_host2_$$
cleanup() {
  ip netns del "$ns1" 2>/dev/null || true
  ip netns del "$ns2" 2>/dev/null || true
}
trap cleanup EXIT
if ! ip netns add "$ns1" 2>/dev/null; then
  echo "cannot create network namespaces (needs root and CAP_SYS_ADMIN): skipped"
  exit 77
fi
ip netns add "$ns2"
ip link add "v1_$$" type veth peer name "v2_$$"
ip link set "v1_$$" netns "$ns1"
ip link set "v2_$$" netns "$ns2"
ip netns exec "$ns1" ip addr add 10.77.0.1/24 dev "v1_$$"
ip netns exec "$ns2" ip addr add 10.77.0.2/24 dev "v2_$$"
for ns in "$ns1" "$ns2"; do
  ip netns exec "$ns" ip link set lo up
done
ip netns exec "$ns1" ip link set "v1_$$" up
ip netns exec "$ns2" ip link set "v2_$$" up

# The launcher agent: Open MPI runs `agent <host> <command...>` to start its daemon on a host.
agent="$out/netns-agent.sh"
cat > "$agent" <<AGENT
#!/usr/bin/env bash
host=\$1; shift
case "\$host" in
  10.77.0.1) ns=$ns1 ;;
  10.77.0.2) ns=$ns2 ;;
  *) echo "unknown host \$host" >&2; exit 1 ;;
esac
echo "\$host" >> "$out/agent.log"
exec ip netns exec "\$ns" sh -c "\$*"
AGENT
chmod +x "$agent"

"$cli" generate -o "$out/data.nc" --users 400 --items 257 --nnz 6000 --seed 8 -q
cat > "$out/net.json" <<'JSON'
{ "Version": 0.9, "Name": "hosts", "Kind": "AutoEncoder", "ErrorFunction": "CrossEntropy",
  "Denoising": {"p": 0.2},
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": 63, "Activation": "Tanh"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output", "Activation": "SoftMax"}
  ]}
JSON
train="train -c $out/net.json -i $out/data.nc -b 32 -e 3 --optimizer adam --learning-rate 0.01 --threads 1"

"$cli" $train -n "$out/one.nc" --metrics-out "$out/one.jsonl" -q
# Rank 0 in the first namespace, rank 1 in the second; TCP over the veth pair only.
ip netns exec "$ns1" mpirun --allow-run-as-root --oversubscribe --bind-to none \
  -H 10.77.0.1:1,10.77.0.2:1 -np 2 \
  --mca plm_rsh_agent "$agent" --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
  --mca oob_tcp_if_include 10.77.0.0/24 -x OMP_NUM_THREADS=1 \
  "$cli" $train -n "$out/two.nc" --metrics-out "$out/two.jsonl" > "$out/two.log" 2>&1 \
  || { cat "$out/two.log"; exit 1; }
grep -q "x 2 ranks" "$out/two.log" || { echo "not split over 2 ranks"; cat "$out/two.log"; exit 1; }
# The second rank's daemon was started in the second namespace, through the agent.
grep -qx "10.77.0.2" "$out/agent.log" || { echo "no daemon started on 10.77.0.2"; exit 1; }
echo "rank 1 ran in namespace $ns2 (10.77.0.2), reached over TCP on the veth pair"

"$cli" predict -n "$out/one.nc" --input "$out/data.nc" -k 10 -s "$out/one.txt"
"$cli" predict -n "$out/two.nc" --input "$out/data.nc" -k 10 -s "$out/two.txt"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
one = [json.loads(l)["loss"] for l in open(f"{out}/one.jsonl")]
two = [json.loads(l)["loss"] for l in open(f"{out}/two.jsonl")]
worst = max(abs(a - b) / abs(a) for a, b in zip(one, two))
print("losses, one process:", one)
print("losses, two hosts:  ", two)
def recs(path):
    rows = []
    for line in open(path):
        rows.append([p.split(",") for p in line.rstrip("\n").split("\t")[1].split(":")])
    return rows
a, b = recs(f"{out}/one.txt"), recs(f"{out}/two.txt")
slots = sum(len(r) for r in a)
same = sum(x[0] == y[0] for ra, rb in zip(a, b) for x, y in zip(ra, rb))
score = max(abs(float(x[1]) - float(y[1])) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
print(f"largest relative loss difference {worst:.2e}; top-10 slots identical {same}/{slots}; "
      f"largest score difference {score:.2e}")
ok = len(one) == len(two) == 3 and worst < 1e-5 and same >= 0.99 * slots and score < 1e-4
print("agree" if ok else "DISAGREE")
sys.exit(0 if ok else 1)
PY
