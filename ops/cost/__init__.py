"""``metalake cost``: what a metalake platform costs on AWS each month (docs/cost.md)."""
