"""Does nn.Embedding backward vary between runs with deterministic mode off (the fused atomic
kernel the catalogue dates to 2.11, entry embedding_dense_backward)? 6 runs per shape."""
import json, os, torch, torch.nn as nn
dev = "cuda"; out = {}
def run(distinct, n, dim, sgf):
    e = nn.Embedding(1000, dim, scale_grad_by_freq=sgf).to(dev)
    i = torch.randint(0, distinct, (n,), device=dev, generator=torch.Generator(dev).manual_seed(2))
    w = torch.randn(n, dim, device=dev, generator=torch.Generator(dev).manual_seed(3))
    (e(i) * w).sum().backward(); return e.weight.grad
for det in (False, True):
    torch.use_deterministic_algorithms(det)
    for distinct, n, dim, sgf in [(4, 1 << 18, 64, False), (4, 1 << 18, 512, False), (64, 1 << 16, 32, False), (4, 1 << 18, 64, True), (1, 1 << 20, 128, False)]:
        res = {bytes(run(distinct, n, dim, sgf).cpu().view(-1).view(torch.uint8).tolist()) for _ in range(6)}
        k = f"embedding distinct={distinct} n={n} dim={dim} sgf={sgf} det={det}"; out[k] = len(res); print(k, len(res))
json.dump({"torch": torch.__version__, "variation": out}, open(os.path.join(os.environ["OUT"], "emb.json"), "w"), indent=1)
