"""The AWNN studies: one module per experiment (setting, configs, train function) and the chapters' readings."""
