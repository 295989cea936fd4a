# GPU load for scripts/gpu-check.sh: 12 s of bf16 matmuls (tensor cores, power, SM clock),
# then 12 s of device-to-device copies (DRAM bandwidth), holding ~20 GiB.
import time, torch, sys
d = torch.device("cuda")
hold = torch.empty(20 * (1 << 30), dtype=torch.uint8, device=d)
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=d); b = torch.randn_like(a)
t0 = time.time(); n = 0
while time.time() - t0 < 12:
    for _ in range(20): c = a @ b
    torch.cuda.synchronize(); n += 20
print(f"matmul: {n} products, {n*2*8192**3/(time.time()-t0)/1e12:.0f} TFLOP/s", flush=True)
x = torch.empty(4 << 30, dtype=torch.uint8, device=d); y = torch.empty_like(x)
t0 = time.time(); n = 0
while time.time() - t0 < 12:
    for _ in range(10): y.copy_(x)
    torch.cuda.synchronize(); n += 10
print(f"copy: {n*2*x.numel()/(time.time()-t0)/1e12:.2f} TB/s read+write", flush=True)
