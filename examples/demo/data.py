import os

import numpy as np
import torch
from torch.utils.data import Dataset


class NoisyDigits(Dataset):
    def __init__(self, root: str) -> None:
        self.files = [os.path.join(root, name) for name in os.listdir(root)]
        self.rng = np.random.default_rng(0)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int):
        image = torch.from_numpy(np.load(self.files[index])).float()
        noise = torch.from_numpy(self.rng.normal(0, 0.1, size=tuple(image.shape))).float()
        return image + noise, index % 10
