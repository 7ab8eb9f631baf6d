"""Where each role starts: "/" and the page after login."""

from __future__ import annotations

import pytest
from django.test import Client

from annotation.services.studies import study_create
from tests.factories import client_for, new_user

pytestmark = pytest.mark.django_db


def lands(user) -> str:
    response = client_for(user).get("/")
    assert response.status_code == 302
    return response["Location"]


def test_annotators_land_on_their_queue(study, trio):
    assert lands(trio[0]) == "/annotate/"


def test_the_adjudicator_of_a_study_lands_on_the_adjudication_queue(study, adjudicator):
    assert lands(adjudicator) == "/annotate/adjudication/"


def test_an_adjudicator_of_no_study_lands_on_the_runs(adjudicator):
    assert lands(adjudicator) == "/trajectories/"


def test_admins_land_on_the_runs(admin_user):
    assert lands(admin_user) == "/trajectories/"


def test_an_admin_who_adjudicates_a_study_lands_on_the_adjudication_queue(codebook, trio, admin_user):
    study_create(name="S2", codebook=codebook, annotators=trio, adjudicator=admin_user)
    assert lands(admin_user) == "/annotate/adjudication/"


def test_a_study_annotator_without_the_role_lands_on_the_queue(codebook, trio, adjudicator):
    plain = new_user("plain")
    study_create(name="S3", codebook=codebook, annotators=[plain, trio[0], trio[1]], adjudicator=adjudicator)
    assert lands(plain) == "/annotate/"


def test_a_user_with_no_role_lands_on_the_runs(outsider):
    assert lands(outsider) == "/trajectories/"


def test_anonymous_is_sent_to_log_in():
    response = Client().get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_home_answers_get_only(annotator):
    assert client_for(annotator).post("/").status_code == 405


@pytest.mark.parametrize(("who", "where"), [("coder1", "/annotate/"), ("senior", "/annotate/adjudication/")])
def test_login_leads_to_the_role_landing(study, who, where):
    client = Client()
    response = client.post("/accounts/login/", {"username": who, "password": f"pw-{who}"}, follow=True)
    assert response.redirect_chain[-1][0] == where and response.status_code == 200


def test_login_still_honours_next(study, trio):
    response = Client().post("/accounts/login/?next=/codebooks/", {"username": "coder1", "password": "pw-coder1"})
    assert response["Location"] == "/codebooks/"
