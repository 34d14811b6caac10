"""A small image classifier with the reproducibility mistakes real training scripts make."""

import torch
import torch.nn as nn
from torch.backends import cudnn
from torch.utils.data import DataLoader

from data import NoisyDigits
from utils import seed_everything


def build_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 26 * 26, 10))


def main() -> None:
    model = build_model()
    seed_everything(0, deterministic=True)  # too late: the model is already initialised
    cudnn.benchmark = True  # fast, but picks algorithms by timing
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    loader = DataLoader(NoisyDigits("digits/"), batch_size=32, shuffle=True, num_workers=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for images, labels in loader:
        loss = nn.functional.cross_entropy(model(images.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
