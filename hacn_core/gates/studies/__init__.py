"""The Residual Gates studies: MNIST fully connected networks (Sec. 3.1) and CIFAR ResNets (Sec. 3.2)."""
