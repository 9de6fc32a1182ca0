"""bietti2022 (Bietti, Wei, Dudík, Langford, Wu, ICML 2022): personalized private SGD (spec/bietti2022.md).
No figure landed yet."""

FIGURES: dict = {}
