"""The raftkv.v1 gRPC API, generated at build time from protos/raftkv/v1/*.proto.

Modules: kv_pb2 / kv_pb2_grpc (service KV), watch_pb2 / watch_pb2_grpc
(Watch), lease_pb2 / lease_pb2_grpc (Lease), admin_pb2 / admin_pb2_grpc
(Admin). They are written here by the package's build step (setup.py) and are
not part of the source tree.
"""
