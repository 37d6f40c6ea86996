// File: tools/mlasim/main.cpp — the `mlasim` executable; everything else is in cli.cpp.
#include <iostream>

#include "tools/mlasim/cli.h"

int main(int argc, char** argv) {
  return mlasim::cli::RunMlasim(argc, argv, std::cout, std::cerr);
}
