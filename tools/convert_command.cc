#include "tools/convert_command.h"

#include <CLI/CLI.hpp>

namespace lmdbloader {

void ConvertCommand::Register(CLI::App*) {}
int ConvertCommand::Run() { return 2; }

}  // namespace lmdbloader
