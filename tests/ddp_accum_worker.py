"""Worker for tests/test_ddp.py: a tiny GPT trained by ``llmbook.train.train`` with grad_accum=2.

Run directly (one process) or under ``torchrun --nproc_per_node=2`` (gloo, CPU): both see
the same global batches, so the final weights must agree. Writes the weights (rank 0)
to the safetensors file named by the first argument.
"""

import os
import sys


def main(out: str) -> None:
    import torch
    import torch.distributed as dist
    from safetensors.torch import save_file

    from llmbook.gpt import GPT, GPTConfig
    from llmbook.train import TrainConfig, random_windows, train

    torch.set_num_threads(1)
    backend = os.environ.get("LLMBOOK_DDP_BACKEND", "gloo")  # "nccl": one GPU per process (tests/test_cuda.py)
    distributed = "RANK" in os.environ
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    if distributed:
        dist.init_process_group(backend)
    torch.manual_seed(0)
    # No biases: the key bias has an exactly zero gradient (softmax ignores a shift shared by a
    # row), so its computed gradient is rounding noise that Adam would blow up to full steps.
    model = GPT(GPTConfig(vocab_size=17, block_size=8, n_layer=1, n_head=2, d_model=16, d_ff=32, bias=False)).to(device)
    ids = torch.arange(600) * 7 % 17  # a deterministic token stream
    get_batch = random_windows(ids[:500], ids[500:], block_size=8, batch_size=4)
    cfg = TrainConfig(max_steps=3, warmup_steps=1, lr=1e-2, min_lr=1e-3, grad_accum=2, eval_interval=3,
                      eval_batches=1, progress=False, seed=1)
    train(model, get_batch, cfg)
    if not distributed or dist.get_rank() == 0:
        save_file({k: v.cpu().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}, out)
    if distributed:
        # Every rank waits here before tearing gloo down: a rank that destroys the group while
        # its peer is still inside a collective or printing can abort the peer at exit
        # ("terminate called without an active exception", seen once on the CI machine).
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
