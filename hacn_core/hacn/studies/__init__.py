"""The H-ACN studies: MLP-Mixers joined by each residual rule (Secs. 3.1 and 4)."""
