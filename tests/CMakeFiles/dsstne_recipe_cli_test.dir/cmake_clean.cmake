file(REMOVE_RECURSE
  "CMakeFiles/dsstne_recipe_cli_test.dir/cli/dsstne_recipe_cli_test.cpp.o"
  "CMakeFiles/dsstne_recipe_cli_test.dir/cli/dsstne_recipe_cli_test.cpp.o.d"
  "dsstne_recipe_cli_test"
  "dsstne_recipe_cli_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/dsstne_recipe_cli_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
