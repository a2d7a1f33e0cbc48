"""What every local listener and its clients share: the key and the Host/Origin rules (`auth`), connection and
request limits (`limits`), the HTTP connection guard (`http_guard`), RPC method names and refusal texts (`wire`).

Below its users, the RPC transports (`pyruntime.rpc`), the public model port (`pyruntime.model.public_port`)
and the Python client (`pyruntime.client`), so that none of them reaches into another.
"""
