"""A stored document comes back as a download, never as a page of the API's origin: an HTML
upload is served as an `application/octet-stream` attachment, unsniffable and sandboxed."""

from __future__ import annotations

from urllib.parse import unquote

from entryway.notary.service import Notary
from entryway.storage.notary import NotaryStore
from tests.integration.api.conftest import Api

PAGE = b"<html><body><script>fetch('/v1/keys')</script></body></html>"


async def test_a_stored_html_document_is_served_as_an_attachment(api: Api) -> None:
    api.services.notary = Notary(NotaryStore(api.services.store.engine), [80002])
    uploaded = await api.client.post(
        "/v1/notarizations/document",
        headers=api.auth(),
        data={"chainId": "80002", "store": "true"},
        files={"file": ("rapport d'été.html", PAGE, "text/html")},
    )
    assert uploaded.status_code == 202, uploaded.text
    notarization = uploaded.json()
    assert notarization["contentType"] == "text/html"  # the uploaded type stays on record

    r = await api.client.get(f"/v1/notarizations/{notarization['id']}/document", headers=api.auth())
    assert r.status_code == 200 and r.content == PAGE
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    disposition = r.headers["Content-Disposition"]
    assert disposition.startswith('attachment; filename="rapport d__t_.html"; ')
    exact = disposition.split("filename*=UTF-8''", 1)[1]
    assert unquote(exact) == "rapport d'été.html" and " " not in exact
