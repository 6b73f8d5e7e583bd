"""Sharing guest tensors and timelines with CUDA (and so PyTorch): the CUDA
driver calls, CUDA views of exportable tensors, and timelines CUDA streams
wait on and signal. See "Interop with PyTorch" in docs/integration.md."""
