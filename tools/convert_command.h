// `lmdbloader convert`: registered on the main command line.
#ifndef LMDBLOADER_TOOLS_CONVERT_COMMAND_H_
#define LMDBLOADER_TOOLS_CONVERT_COMMAND_H_

namespace CLI {
class App;
}

namespace lmdbloader {

class ConvertCommand {
 public:
  void Register(CLI::App* app);
  int Run();  // after parsing, when the convert subcommand was chosen
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_TOOLS_CONVERT_COMMAND_H_
