
# Per-language clean rules from dependency scanning.
foreach(lang )
  include(CMakeFiles/tests_config.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
