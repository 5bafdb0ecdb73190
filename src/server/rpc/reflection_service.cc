#include "server/rpc/reflection_service.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <mutex>
#include <set>
#include <utility>

namespace raftkv {

namespace rpb = grpc::reflection::v1alpha;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

namespace {

void Error(grpc::StatusCode code, const std::string& message, rpb::ServerReflectionResponse* response) {
  response->mutable_error_response()->set_error_code(static_cast<int32_t>(code));
  response->mutable_error_response()->set_error_message(message);
}

// `file` and every file it imports, transitively, imports first.
void AddFiles(const FileDescriptor* file, std::set<std::string>* seen, rpb::FileDescriptorResponse* out) {
  if (!seen->insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) AddFiles(file->dependency(i), seen, out);
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out->add_file_descriptor_proto());
}

// The file answer, or NOT_FOUND for no file or a hidden one.
void FileAnswer(const FileDescriptor* file, const std::string& what, rpb::ServerReflectionResponse* response) {
  if (file == nullptr || ReflectionService::IsHidden(file->package())) {
    return Error(grpc::StatusCode::NOT_FOUND, what + " not found", response);
  }
  std::set<std::string> seen;
  AddFiles(file, &seen, response->mutable_file_descriptor_response());
}

class ReflectionReactor final
    : public grpc::ServerBidiReactor<rpb::ServerReflectionRequest, rpb::ServerReflectionResponse> {
 public:
  explicit ReflectionReactor(const ReflectionService* service) : service_(service) { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;  // cancelled meanwhile
    if (!ok) return FinishLocked(grpc::Status::OK);
    if (++answered_ > ReflectionService::kMaxRequestsPerStream) {
      return FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                       "more than " + std::to_string(ReflectionService::kMaxRequestsPerStream) +
                                           " reflection requests on one stream"));
    }
    response_.Clear();
    service_->Answer(request_, &response_);
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (!ok) return FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke"));
    StartRead(&request_);
  }
  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  void OnDone() override { delete this; }

 private:
  void FinishLocked(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  const ReflectionService* const service_;
  std::mutex mu_;
  rpb::ServerReflectionRequest request_;
  rpb::ServerReflectionResponse response_;
  int answered_ = 0;       // guarded by mu_
  bool finished_ = false;  // guarded by mu_
};

}  // namespace

ReflectionService::ReflectionService(std::vector<std::string> services) : services_(std::move(services)) {}

bool ReflectionService::IsHidden(const std::string& package) {
  return package == "raftkv.internal" || package.rfind("raftkv.internal.", 0) == 0;
}

grpc::ServerBidiReactor<rpb::ServerReflectionRequest, rpb::ServerReflectionResponse>*
ReflectionService::ServerReflectionInfo(grpc::CallbackServerContext* /*context*/) {
  return new ReflectionReactor(this);
}

void ReflectionService::Answer(const rpb::ServerReflectionRequest& request,
                               rpb::ServerReflectionResponse* response) const {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  response->set_valid_host(request.host());
  *response->mutable_original_request() = request;
  switch (request.message_request_case()) {
    case rpb::ServerReflectionRequest::kListServices:
      for (const std::string& name : services_) response->mutable_list_services_response()->add_service()->set_name(name);
      return;
    case rpb::ServerReflectionRequest::kFileByFilename:
      return FileAnswer(pool->FindFileByName(request.file_by_filename()),
                        "file " + request.file_by_filename(), response);
    case rpb::ServerReflectionRequest::kFileContainingSymbol:
      return FileAnswer(pool->FindFileContainingSymbol(request.file_containing_symbol()),
                        "symbol " + request.file_containing_symbol(), response);
    case rpb::ServerReflectionRequest::kFileContainingExtension: {
      const auto& ext = request.file_containing_extension();
      const google::protobuf::Descriptor* type = pool->FindMessageTypeByName(ext.containing_type());
      const google::protobuf::FieldDescriptor* field =
          type == nullptr ? nullptr : pool->FindExtensionByNumber(type, ext.extension_number());
      return FileAnswer(field == nullptr ? nullptr : field->file(),
                        "extension " + std::to_string(ext.extension_number()) + " of " + ext.containing_type(),
                        response);
    }
    case rpb::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const google::protobuf::Descriptor* type = pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr || IsHidden(type->file()->package())) {
        return Error(grpc::StatusCode::NOT_FOUND, "type " + request.all_extension_numbers_of_type() + " not found",
                     response);
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      auto* out = response->mutable_all_extension_numbers_response();
      out->set_base_type_name(type->full_name());
      for (const auto* e : extensions) out->add_extension_number(e->number());
      return;
    }
    default:
      return Error(grpc::StatusCode::INVALID_ARGUMENT, "the request asks nothing", response);
  }
}

}  // namespace raftkv
