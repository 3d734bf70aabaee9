# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for dsstne_recipe_cli_test.
