# Empty compiler generated dependencies file for dsstne_recipe_cli_test.
# This may be replaced when dependencies are built.
