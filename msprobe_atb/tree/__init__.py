"""The derived dump tree: record logs -> statistic.csv, info/layer, info/model, markers."""
