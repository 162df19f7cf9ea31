// The Python extension weft_torch._C: the ProcessGroupWeft type and its creator.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "python/weft_torch/process_group.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "Weft's torch.distributed backend (registered as \"weft\" by `import weft_torch`)";
  // Makes c10d's ProcessGroup and Store types known to pybind11 before they are used below.
  py::module::import("torch.distributed");
  py::class_<weft_torch::ProcessGroupWeft, c10d::ProcessGroup,
             c10::intrusive_ptr<weft_torch::ProcessGroupWeft>>(m, "ProcessGroupWeft")
      .def(py::init(&weft_torch::ProcessGroupWeft::create), py::arg("store"), py::arg("rank"),
           py::arg("world_size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>());
  m.def("create_process_group", &weft_torch::ProcessGroupWeft::create, py::arg("store"),
        py::arg("rank"), py::arg("world_size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>(),
        "The creator torch.distributed calls for backend \"weft\": (store, rank, world_size, "
        "timeout) -> ProcessGroup");
  m.def(
      "version", [] { return std::string(weftVersionString()); }, "Weft's version string");
}
