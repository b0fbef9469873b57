"""The PaddlePaddle book programs, written as fluid 1.x users wrote them, on small local data."""
