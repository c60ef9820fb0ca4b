"""`index` and `query`: the Parquet manifest, built and queried."""
