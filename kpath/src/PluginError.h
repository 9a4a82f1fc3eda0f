// An error of the plugin's own inputs (environment, options, guidance file), reported through the
// module's context: clang prints "error: ..." and fails the compilation without a crash report
// (report_fatal_error makes clang print a stack dump and ask for a bug report, as if it had
// crashed); opt prints it and exits with status 1.
#pragma once

#include <string>

#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"

namespace hcct::kpath {

class PluginError : public llvm::DiagnosticInfo {
 public:
  explicit PluginError(std::string message) : DiagnosticInfo(kind(), llvm::DS_Error), message_(std::move(message)) {}
  void print(llvm::DiagnosticPrinter &printer) const override { printer << message_; }

 private:
  static int kind() {
    static const int k = llvm::getNextAvailablePluginDiagnosticKind();
    return k;
  }
  std::string message_;
};

}  // namespace hcct::kpath
