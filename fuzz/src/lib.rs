//! What the fuzz targets share: an AdmissionReview from bytes (as the HTTP route decodes
//! it), driving a webhook route's handler, and checking its answer can be encoded and,
//! when it carries a patch, applied to the object it was computed from.
//!
//! Handlers are called directly, not through the server's `catch_unwind`: a panic the
//! server would turn into a denial is a crash here.

use kruise_runtime::webhook::{AdmissionRequest, AdmissionResponse, HandlerError, Route};
use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;

/// The request of an AdmissionReview, decoded as the webhook server decodes it; `None`
/// for what the server answers with HTTP 400 before any handler runs.
pub fn request(data: &[u8]) -> Option<AdmissionRequest<DynamicObject>> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(data).ok()?;
    review.try_into().ok()
}

/// Runs every admission route of `routes` (conversion routes are skipped) on `data`.
pub fn drive_routes(routes: &[Route], data: &[u8]) {
    let Some(request) = request(data) else {
        return;
    };
    for route in routes.iter().filter(|r| r.conversion.is_none()) {
        let answer = futures::executor::block_on((route.handler)(request.clone()));
        check_answer(&request, answer);
    }
}

/// Encode the answer (as the server does) and apply its patch to the request's object.
pub fn check_answer(
    request: &AdmissionRequest<DynamicObject>,
    answer: Result<AdmissionResponse, HandlerError>,
) {
    // A handler error is a legitimate answer (the route's OnFailure decides).
    let Ok(response) = answer else {
        return;
    };
    if let Some(patch) = &response.patch {
        let patch: json_patch::Patch =
            serde_json::from_slice(patch).expect("the patch is a JSON patch");
        let mut object = serde_json::to_value(request.object.as_ref().expect("patch of no object"))
            .expect("the object encodes");
        json_patch::patch(&mut object, &patch).unwrap_or_else(|e| {
            panic!("the patch does not apply to the object it was computed from: {e}")
        });
    }
    serde_json::to_vec(&response.into_review()).expect("the review encodes");
}
