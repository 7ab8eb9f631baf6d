"""Admins add people and set their roles on the People page; nobody else can; every change is logged."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.roles import ADJUDICATOR, ANNOTATOR, role_names
from activity.models import ActivityEntry
from tests.factories import client_for

pytestmark = pytest.mark.django_db
User = get_user_model()
GOOD = {"username": "dana", "email": "dana@example.org", "password": "a-long-pass-phrase-9", "roles": ["annotator"]}


def test_an_admin_adds_a_person_who_logs_in_with_the_role_and_is_offered_for_studies(admin_user):
    client = client_for(admin_user)
    response = client.post("/accounts/people/add/", GOOD)
    assert response.status_code == 302 and response["Location"] == "/accounts/people/"
    dana = User.objects.get(username="dana")
    assert role_names(dana) == {ANNOTATOR} and dana.email == "dana@example.org"
    assert Client().login(username="dana", password=GOOD["password"])
    entry = ActivityEntry.objects.get(action="person.create")
    assert entry.actor == admin_user and entry.detail == {"username": "dana", "roles": ["annotator"]}
    assert "dana" in client.get("/annotate/studies/new/").content.decode()  # an annotator to choose
    assert "dana" in client.get("/accounts/people/").content.decode()


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"username": ""}, "username", "required"),
        ({"username": "da na"}, "username", "Enter a valid username"),
        ({"username": "d\x00na"}, "username", "Enter a valid username"),
        ({"username": "x" * 151}, "username", "at most 150"),
        ({"username": "BOSS"}, "username", "taken"),  # the admin fixture's, in another case
        ({"email": "not-an-address"}, "email", "valid email"),
        ({"password": "dana"}, "password", "too similar"),
        ({"password": "12345678"}, "password", "too common"),
        ({"roles": ["annotator", "owner"]}, "roles", "no such role: owner"),
    ],
)
def test_refused_input_names_its_field_and_stores_nothing(admin_user, change, field, says):
    people = User.objects.count()
    response = client_for(admin_user).post("/accounts/people/add/", {**GOOD, **change})
    body = response.content.decode()
    assert response.status_code == 422 and f"({field})" in body and says in body
    assert GOOD["password"] not in body  # a password is never echoed
    assert User.objects.count() == people
    assert not ActivityEntry.objects.filter(action="person.create").exists()


def test_an_admin_sets_roles_and_the_change_is_logged(admin_user, annotator):
    client = client_for(admin_user)
    response = client.post("/accounts/people/roles/", {"person": annotator.pk, "roles": [ANNOTATOR, ADJUDICATOR]})
    assert response.status_code == 302
    annotator.refresh_from_db()
    assert role_names(User.objects.get(pk=annotator.pk)) == {ANNOTATOR, ADJUDICATOR}
    entry = ActivityEntry.objects.get(action="person.roles")
    assert entry.detail["before"] == [ANNOTATOR] and entry.detail["after"] == [ANNOTATOR, ADJUDICATOR]
    assert client.post("/accounts/people/roles/", {"person": "x1"}).status_code == 422
    assert client.post("/accounts/people/roles/", {"person": "999999"}).status_code == 404


def test_an_admin_cannot_take_their_own_admin_role_away(admin_user):
    response = client_for(admin_user).post("/accounts/people/roles/", {"person": admin_user.pk, "roles": [ANNOTATOR]})
    assert response.status_code == 422 and "your own admin role" in response.content.decode()
    assert "admin" in role_names(User.objects.get(pk=admin_user.pk))


def test_nobody_else_sees_or_changes_people(annotator, adjudicator, outsider):
    for who in (annotator, adjudicator, outsider):
        client = client_for(who)
        assert client.get("/accounts/people/").status_code == 403
        assert client.post("/accounts/people/add/", GOOD).status_code == 403
        assert client.post("/accounts/people/roles/", {"person": who.pk, "roles": ["admin"]}).status_code == 403
    assert Client().get("/accounts/people/").status_code == 302  # to log in
    assert not User.objects.filter(username="dana").exists()
    assert "admin" not in role_names(User.objects.get(pk=outsider.pk))


def test_everyone_changes_their_own_password(annotator):
    client = client_for(annotator)
    annotator.set_password("old-pass-phrase-123")
    annotator.save()
    client.force_login(annotator)
    response = client.post(
        "/accounts/password/",
        {
            "old_password": "old-pass-phrase-123",
            "new_password1": "new-pass-phrase-456",
            "new_password2": "new-pass-phrase-456",
        },
    )
    assert response.status_code == 302
    assert "Your password is changed." in client.get(response["Location"], follow=True).content.decode()
    assert Client().login(username=annotator.username, password="new-pass-phrase-456")
    wrong = client.post("/accounts/password/", {"old_password": "nope", "new_password1": "x", "new_password2": "y"})
    assert wrong.status_code == 200 and "incorrect" in wrong.content.decode()
