// python/baton/torch/_work.cpp: the thin C++ layer of the torch.distributed backend "baton" (issue 10 allows C++
// for this layer only; baton's C core is underneath, reached through baton._baton's capsule, baton_capi.h).
//
// What it does: the backend's asynchronous all-reduce (DDP's gradient buckets) returns a c10d::Work written in
// C++ whose torch future a C++ thread completes. The Python route (baton/torch/c10d.py without this module)
// makes a torch.futures.Future, a Python Work subclass and a queue entry per call, and a Python waiter thread
// takes the GIL to complete each future (converting the result list back to an IValue); DDP's reducer then calls
// the Python get_future() through torch's trampoline. Here the reducer calls getFuture() in C++, and the
// completing thread waits for baton's work and marks the future complete without Python or the GIL.
//
// Built only when Debian's libtorch-dev headers are present (Makefile: TORCH_EXT); baton/torch/c10d.py falls
// back to the Python route when the module is missing or BATON_TORCH_WORK=python.
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "baton/comm.h"  // the dtype names only: the library is called through the capsule
#include "baton_capi.h"

namespace py = pybind11;

namespace {

const baton_capi *g_capi = nullptr;

class BatonWork : public c10d::Work {
 public:
  explicit BatonWork(std::vector<at::Tensor> tensors)
      : c10d::Work(-1, c10d::OpType::ALLREDUCE), tensors_(std::move(tensors)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  std::vector<at::Tensor> result() override { return tensors_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Called once, by the completing thread.
  void complete(const std::string &error) {
    if (error.empty()) {
      future_->markCompleted(c10::IValue(tensors_));
      finish();
    } else {
      auto e = std::make_exception_ptr(std::runtime_error(error));
      future_->setError(e);
      finish(e);
    }
  }

 private:
  std::vector<at::Tensor> tensors_;  // keeps the memory baton works on alive until the all-reduce is done
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

struct Pending {
  std::vector<void *> works;
  std::string error;  // a start failure already known
  c10::intrusive_ptr<BatonWork> work;
};

// One completing thread per process, started on first use: waits for baton's works in the order they were
// started (the order baton finishes them), then completes their torch futures.
class Completer {
 public:
  void push(Pending p) {
    std::lock_guard<std::mutex> g(mu_);
    if (!started_) {
      std::thread(&Completer::run, this).detach();  // detached: it only ever waits; ends with the process
      started_ = true;
    }
    q_.push_back(std::move(p));
    cv_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      Pending p;
      {
        std::unique_lock<std::mutex> g(mu_);
        cv_.wait(g, [this] { return !q_.empty(); });
        p = std::move(q_.front());
        q_.pop_front();
      }
      std::string error = p.error;
      for (void *w : p.works) {
        int rc = g_capi->wait(w);
        if (rc < 0 && error.empty()) {
          char msg[512];
          g_capi->describe(rc, "baton: asynchronous all-reduce", msg, sizeof msg);
          error = msg;
        }
      }
      p.work->complete(error);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> q_;
  bool started_ = false;
};

Completer *g_completer = nullptr;  // never freed: the detached thread uses it until the process ends

int baton_dtype_of(const at::Tensor &t) {
  switch (t.scalar_type()) {
    case at::kFloat: return BATON_F32;
    case at::kDouble: return BATON_F64;
    case at::kHalf: return BATON_F16;
    case at::kBFloat16: return BATON_BF16;
    case at::kInt: return BATON_I32;
    case at::kLong: return BATON_I64;
    default: return -1;
  }
}

void bind(py::capsule capi) {
  auto *p = static_cast<const baton_capi *>(capi.get_pointer());
  if (capi.name() == nullptr || std::string(capi.name()) != BATON_CAPI_NAME || p->version != BATON_CAPI_VERSION)
    throw std::runtime_error("baton.torch._work: baton._baton's capsule is from another version; rebuild the package");
  g_capi = p;
  if (!g_completer) g_completer = new Completer();
}

// In-place asynchronous all-reduce of each (contiguous CPU) tensor, as one Work. Raises ValueError for a tensor it
// cannot take (the caller checks first, so that is a bug) and baton.Error's message as RuntimeError when a start
// fails; a failure while running completes the Work (and its future) with the error.
c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> tensors, int op) {
  if (!g_capi) throw std::runtime_error("baton.torch._work: bind() was not called");
  for (const auto &t : tensors) {
    if (!t.device().is_cpu() || !t.is_contiguous() || baton_dtype_of(t) < 0)
      throw py::value_error("baton.torch._work.allreduce: tensors must be contiguous CPU tensors of f32, f64, f16, "
                            "bf16, int32 or int64");
  }
  auto work = c10::make_intrusive<BatonWork>(tensors);
  Pending p;
  p.work = work;
  {
    py::gil_scoped_release nogil;
    for (auto &t : tensors) {
      void *w = nullptr;
      int rc = g_capi->allreduce_start(t.data_ptr(), static_cast<size_t>(t.numel()), baton_dtype_of(t), op, &w);
      if (rc < 0) {
        char msg[512];
        g_capi->describe(rc, "baton: asynchronous all-reduce", msg, sizeof msg);
        p.error = msg;
        break;
      }
      p.works.push_back(w);
    }
    if (p.works.empty() && !p.error.empty()) {
      work->complete(p.error);
      return work;
    }
    g_completer->push(std::move(p));
  }
  return work;
}

}  // namespace

PYBIND11_MODULE(_work, m) {
  m.doc() = "baton.torch's C++ work layer for the torch.distributed backend (see baton/torch/c10d.py)";
  py::module::import("torch.distributed");  // registers c10d.Work with pybind11 before we return one
  m.def("bind", &bind, "bind(baton._baton._capi): the C functions to run on");
  m.def("allreduce", &allreduce, py::arg("tensors"), py::arg("op"),
        "allreduce(tensors, op) -> torch.distributed Work: in-place asynchronous all-reduce, completed in C++");
}
