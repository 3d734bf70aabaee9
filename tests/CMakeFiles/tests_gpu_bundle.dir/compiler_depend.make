# Empty custom commands generated dependencies file for tests_gpu_bundle.
# This may be replaced when dependencies are built.
