# Empty compiler generated dependencies file for dsstne_configs_train_test.
# This may be replaced when dependencies are built.
